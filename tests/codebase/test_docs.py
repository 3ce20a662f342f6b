"""The documentation is checked against the code (issue 20, item 6).

- every `turnlog` command (subcommands too) has a section `turnlog NAME` in docs/cli.md, with help,
  and each of its own options is named in that section;
- every name in `turnlog.__all__` appears as code in a docs page;
- every docs page is linked from README.md, and README.md stays at most 200 lines;
- links between the pages name files and headings that exist;
- every "docs/behaviour.md §N" in the code names a section that docs/behaviour.md has;
- every TURNLOG_ environment variable the package reads is in docs/configuration.md.

A new command, option, public name or page therefore fails here until it is documented.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

import turnlog
from turnlog.cli import main

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 200

# Options every command shares, documented once at the top of docs/cli.md.
SHARED_OPTIONS = {"--table", "--json", "--nl", "--csv", "--db", "--help"}


def all_commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    """"name" or "group sub" -> command, for the group and every group below it."""
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        full = f"{prefix}{name}"
        found[full] = command
        if isinstance(command, click.Group):
            found.update(all_commands(command, f"{full} "))
    return found


COMMANDS = all_commands(main)


def own_options(command: click.Command) -> list[str]:
    """The long form of each option the command has beyond the shared ones."""
    names = []
    for param in command.params:
        if isinstance(param, click.Option):
            longs = [o for o in param.opts + param.secondary_opts if o.startswith("--")]
            if longs and not SHARED_OPTIONS.intersection(longs):
                names.extend(longs)
    return names


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


CLI_HEADING = re.compile(r"^#{2,4} turnlog (\S+(?: [a-z][\w-]*)*)\s*$", re.MULTILINE)


def cli_sections(text: str) -> dict[str, str]:
    """Command name -> the text of its section in docs/cli.md (up to the next heading)."""
    sections: dict[str, str] = {}
    matches = list(CLI_HEADING.finditer(text))
    for match, following in zip(matches, matches[1:] + [None]):
        end = following.start() if following else len(text)
        rest = text[match.end():end]
        stop = re.search(r"^#", rest, re.MULTILINE)
        sections[match.group(1)] = rest[: stop.start()] if stop else rest
    return sections


def code_identifiers(text: str) -> set[str]:
    """Every identifier written as code: in fenced blocks and in `inline spans`."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    code = "\n".join(fenced + re.findall(r"`([^`\n]+)`", prose))
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#+ (.+?)\s*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", ""))
        found.add(slug.replace(" ", "-"))
    return found


def links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.fixture(scope="module")
def documented_commands() -> dict[str, str]:
    return cli_sections(read(DOCS / "cli.md"))


@pytest.fixture(scope="module")
def shared_part() -> str:
    """docs/cli.md before its first command's section: what several commands share (source options)."""
    text = read(DOCS / "cli.md")
    first = CLI_HEADING.search(text)
    return text[: first.start()] if first else text


@pytest.fixture(scope="module")
def documented_names() -> set[str]:
    return set().union(*(code_identifiers(read(p)) for p in pages()))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_section_in_cli_md(documented_commands, name):
    assert name in documented_commands, f"docs/cli.md has no section '### turnlog {name}'"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name):
    assert COMMANDS[name].help, f"turnlog {name} has no help text"


@pytest.mark.parametrize("name,option", sorted(
    (name, option) for name, command in COMMANDS.items() for option in own_options(command)))
def test_every_option_is_named_in_its_commands_section(documented_commands, shared_part, name, option):
    named = re.compile(rf"`[^`]*{re.escape(option)}(?![\w-])")
    assert named.search(documented_commands.get(name, "")) or named.search(shared_part), \
        f"docs/cli.md names {option} neither in the section of turnlog {name} nor among the shared options"


@pytest.mark.parametrize("name", sorted(turnlog.__all__))
def test_every_public_name_appears_in_the_docs(documented_names, name):
    assert name in documented_names, f"turnlog.{name} is not written as code in any page of docs/"


@pytest.mark.parametrize("page", [p.name for p in pages()])
def test_every_docs_page_is_linked_from_the_readme(page):
    targets = {target.split("#")[0] for target in links(read(README))}
    assert f"docs/{page}" in targets, f"README.md does not link docs/{page}"


def test_the_readme_is_at_most_200_lines():
    lines = len(read(README).splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the depth belongs in docs/"


def _local_links() -> list[tuple[str, Path, str]]:
    found = []
    for source in [README, ROOT / "CHANGELOG.md", *pages()]:
        for target in links(read(source)):
            if "://" in target or target.startswith("mailto:"):
                continue
            found.append((f"{source.relative_to(ROOT)} -> {target}", source, target))
    return found


@pytest.mark.parametrize("where,source,target", _local_links(), ids=[w for w, _, _ in _local_links()])
def test_links_between_pages_name_files_and_headings_that_exist(where, source, target):
    path, _, anchor = target.partition("#")
    file = (source.parent / path).resolve() if path else source
    assert file.exists(), f"{where}: no such file"
    if anchor and file.suffix == ".md":
        assert anchor in anchors(read(file)), f"{where}: no heading with that anchor"


BEHAVIOUR = DOCS / "behaviour.md"
REFERENCE = re.compile(r"docs/behaviour\.md ((?:§[\d.]*\d(?:, | and |; )?)+)")


def behaviour_sections() -> set[str]:
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)*)\.? ", read(BEHAVIOUR), re.MULTILINE))


def behaviour_references() -> list[tuple[str, str]]:
    """(file:line, §N) for every section a source file cites as "docs/behaviour.md §N[, §M]"."""
    found = []
    for path in sorted([*ROOT.joinpath("turnlog").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py")]):
        for number, line in enumerate(read(path).splitlines(), 1):
            for match in REFERENCE.finditer(line):
                for section in re.findall(r"§([\d.]*\d)", match.group(1)):
                    found.append((f"{path.relative_to(ROOT)}:{number}", section))
    return found


def test_the_code_cites_the_behaviour_contract():
    assert len(behaviour_references()) > 20  # the references exist and the pattern still finds them


@pytest.mark.parametrize("where,section", behaviour_references(),
                         ids=[f"{w} section {s}" for w, s in behaviour_references()])
def test_every_behaviour_reference_names_a_section_that_exists(where, section):
    assert section in behaviour_sections(), f"{where} cites docs/behaviour.md §{section}, which has no such section"


def environment_variables() -> list[str]:
    """Every "TURNLOG_..." string literal in the package: the environment variables it reads."""
    found = set()
    for path in ROOT.joinpath("turnlog").rglob("*.py"):
        found.update(re.findall(r"[\"'](TURNLOG_[A-Z_]+)[\"']", read(path)))
    return sorted(found)


@pytest.mark.parametrize("variable", environment_variables())
def test_every_environment_variable_is_in_configuration_md(variable):
    assert f"`{variable}`" in read(DOCS / "configuration.md"), f"docs/configuration.md does not list {variable}"
