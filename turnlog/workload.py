"""The standard gateway workload (shared/bench/WORKLOAD.md): sources, texts and turn order.

Text and source generation follow the reference script line for line, so that turnlog and
Hermes 0.19.0 are measured on the same work for the same seed.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from .domain.source import SessionSource

EN_WORDS = [
    "deploy", "kubernetes", "latency", "database", "migration", "rollback", "pipeline",
    "cache", "server", "config", "backup", "monitor", "alert", "query", "index", "gateway",
    "token", "release", "schedule", "network", "storage", "cluster", "upgrade", "budget",
    "invoice", "meeting", "report", "customer", "feature", "bug", "ticket", "review",
]
EN_PHRASES = [
    "deployment pipeline", "rollback plan", "cache invalidation", "database migration",
    "latency budget", "release schedule", "on-call rotation", "quarterly report",
]
ZH_PHRASES = [
    "数据库迁移", "服务器配置", "部署流水线", "缓存失效", "监控告警", "回滚方案", "日志分析",
    "性能优化", "定时任务", "备份策略", "网络延迟", "用户会话", "发布计划", "季度报告",
]
SEARCH_EN = ["kubernetes", "latency", "migration", "rollback", "invoice", "cluster", "gateway"]
SEARCH_ZH = ["数据库", "服务器", "流水线", "性能优", "监控告", "备份策", "用户会"]
SEARCH_PHRASE = ['"deployment pipeline"', '"rollback plan"', '"latency budget"',
                 '"cache invalidation"', '"release schedule"']


def user_text(rng: random.Random, i: int) -> str:
    words = rng.sample(EN_WORDS, rng.randint(4, 9))
    s = f"Q{i}: can you check the " + " ".join(words)
    if rng.random() < 0.5:
        s += " " + rng.choice(ZH_PHRASES)
    if rng.random() < 0.3:
        s += " re " + rng.choice(EN_PHRASES)
    return s + "?"


def assistant_text(rng: random.Random, target: int = 300) -> str:
    parts = []
    n = 0
    while n < target:
        r = rng.random()
        if r < 0.4:
            frag = " ".join(rng.sample(EN_WORDS, rng.randint(3, 7))).capitalize() + "."
        elif r < 0.55:
            frag = f"We should review the {rng.choice(EN_PHRASES)} first."
        else:
            frag = "".join(rng.sample(ZH_PHRASES, rng.randint(1, 3))) + "，" + \
                rng.choice(["需要确认。", "已经完成。", "请稍后再试。", "我会跟进。"])
        parts.append(frag)
        n += len(frag) + 1
    return " ".join(parts)[:target + 40]


PLATFORM_MIX: list[tuple[int, Callable[[int], dict[str, Any]]]] = [
    (20, lambda i: dict(platform="telegram", chat_type="dm", chat_id=str(100000 + i), user_id=str(100000 + i))),
    (12, lambda i: dict(platform="telegram", chat_type="group", chat_id=f"-100{i:010d}", user_id=str(7000 + i % 13))),
    (12, lambda i: dict(platform="discord", chat_type="thread", chat_id="1100000000000000001",
                        thread_id=str(1300000000000000000 + i), user_id="200000000000000001",
                        scope_id="900000000000000001")),
    (12, lambda i: dict(platform="slack", chat_type="group", chat_id=f"C{i:08d}", user_id=f"U{i % 17:04d}",
                        scope_id="T01WORK")),
    (10, lambda i: dict(platform="whatsapp", chat_type="dm", chat_id=f"{15550000000 + i}@s.whatsapp.net")),
    (8, lambda i: dict(platform="feishu", chat_type="group", chat_id=f"oc_{i:08d}", user_id=f"ou_{i % 7}",
                       user_id_alt=f"on_{i % 7}")),
    (6, lambda i: dict(platform="weixin", chat_type="dm", chat_id=f"wxid_{i:08d}", user_id=f"wxid_{i:08d}")),
    (6, lambda i: dict(platform="signal", chat_type="dm", chat_id=f"+1555{i:07d}", user_id=f"+1555{i:07d}")),
    (5, lambda i: dict(platform="matrix", chat_type="group", chat_id=f"!room{i}:matrix.org",
                       user_id="@alice:matrix.org")),
    (4, lambda i: dict(platform="email", chat_type="dm", chat_id=f"user{i}@example.com")),
    (3, lambda i: dict(platform="api_server", chat_type="dm", chat_id=f"conv_{i:08d}", user_id="svc")),
    (2, lambda i: dict(platform="webhook", chat_type="dm", chat_id=f"hook:{i}", user_id="ci")),
]


def build_sources(n: int, rng: random.Random) -> list[SessionSource]:
    weights = [w for w, _ in PLATFORM_MIX]
    builders = [b for _, b in PLATFORM_MIX]
    out = []
    for i in range(n):
        fields = rng.choices(builders, weights)[0](i)
        fields["chat_name"] = f"chat {i}"
        out.append(SessionSource(**fields))
    return out


def turn_order(sessions: int, turns: int, rng: random.Random) -> list[int]:
    order = [i for i in range(sessions) for _ in range(turns)]
    rng.shuffle(order)
    return order
