"""One Turnlog shared by the threads of a process, as its docstring allows."""

import threading

from turnlog import SessionSource, Turnlog


def test_threads_writing_turns_and_reading_read_models_at_once(tmp_path):
    t = Turnlog(tmp_path / "g.db")
    errors: list[str] = []
    replies: list[str] = []

    def work(i: int) -> None:
        source = SessionSource(platform="telegram", chat_id=f"c{i}", user_id=f"u{i}")
        try:
            for n in range(30):
                source.message_id = f"{i}-{n}"
                # The agent reads a projection mid-turn while other threads write and catch up.
                t.handle_message(source, "hi", lambda h, item: f"{len(t.sessions())} sessions", replies.append)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()

    assert errors == []
    assert len(replies) == 120
    assert len(t.sessions()) == 4
    assert t.maintenance.verify_chain().breaks == []
    t.close()
