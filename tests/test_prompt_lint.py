"""``turnkit prompt-lint`` (turnkit.llm.prompt_lint).

Characters of the canonical rendering without an engine; tokens with the real
engine (llama-server + SmolLM2, tests/engine.py), where the token count must
equal what the engine bills for the same body and the shared prefix must
equal what its cache then serves.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine import closed_port, running_llama_server

from turnkit.llm.client import ChatClient
from turnkit.llm.prompt import PromptLayout
from turnkit.llm.prompt_lint import canonical_render, find_warnings, lint_bodies, lint_files

TOOL = {"type": "function", "function": {"name": "book", "parameters": {"type": "object"}}}
RULES = " ".join(f"Rule {i}: confirm the details with the caller before booking." for i in range(8))


def turnkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "turnkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )


def top_body(name: str, time: str, user: str = "hi") -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": f"Caller name is {name}. It is {time}. {RULES}"},
            {"role": "user", "content": user},
        ],
        "tools": [TOOL],
    }


def laid_out(name: str, user: str = "hi") -> dict[str, Any]:
    lay = PromptLayout(persona="You are Ava at Acme Dental.", rules=[RULES], tools=[TOOL])
    call = lay.start_call({"caller_name": name})
    call.add("user", user)
    return call.request().body()


def write(tmp: Path, name: str, body: Any) -> Path:
    p = tmp / name
    p.write_text(json.dumps(body) if not isinstance(body, str) else body)
    return p


def test_chars_pairs_ratio_and_first_divergence() -> None:
    a, b, c = top_body("Dana", "10:15"), top_body("Eli", "10:15"), top_body("Eli", "10:15")
    r = lint_bodies([("a", a), ("b", b), ("c", c)])
    d = r.as_dict()
    assert d["unit"] == "chars" and len(d["pairs"]) == 2
    ab, bc = d["pairs"]
    assert bc["ratio"] == 1.0 and bc["first_divergence"] is None  # identical
    assert ab["ratio"] < 0.1
    div = d["first_divergence"]
    assert div["field"] == "messages[0].content" and div["message_index"] == 0
    assert div["role"] == "system" and div["in_top"]
    assert div["offset_in_field"] == len("Caller name is ")
    assert div["a_text"].startswith("Dana") and div["b_text"].startswith("Eli")
    want = (ab["shared"] + bc["shared"]) / (ab["total"] + bc["total"])
    assert d["shared_prefix_ratio"] == pytest.approx(want, abs=1e-4)


def test_good_layout_diverges_only_at_the_end() -> None:
    r = lint_bodies([("a", laid_out("Dana")), ("b", laid_out("Eli"))])
    d = r.as_dict()
    assert d["shared_prefix_ratio"] > 0.85
    div = d["first_divergence"]
    assert div["field"] == "messages[2].content" and not div["in_top"]
    assert d["warnings"] == []


def test_divergence_in_tools_and_tool_calls_is_named() -> None:
    a = laid_out("Dana")
    b = json.loads(json.dumps(a))
    b["tools"][0]["function"]["name"] = "book_v2"
    assert lint_bodies([("a", a), ("b", b)]).first_divergence["field"] == "tools[0]"
    c = json.loads(json.dumps(a))
    c["messages"].insert(1, {"role": "assistant", "content": "", "tool_calls": [{"id": "x"}]})
    d = json.loads(json.dumps(c))
    d["messages"][1]["tool_calls"][0]["id"] = "y"
    assert lint_bodies([("c", c), ("d", d)]).first_divergence["field"] == (
        "messages[1].tool_calls[0]"
    )


def test_warnings_only_in_the_top() -> None:
    body = {
        "messages": [
            {
                "role": "system",
                "content": "Today is 2025-03-04, 10:15 am. Call id call_8f3a2b1c. Caller: "
                "+1 555 010 0199. The caller's name is Dana Smith. Greet {caller_name}.",
            },
            {"role": "user", "content": "My number is +1 555 222 3333, I'm Eli, at 10:30."},
        ],
        "tools": [{"type": "function", "function": {"name": "lookup", "description": "uuid "
                   "0b7e5a4c-1f2d-4c3b-9a8e-7d6c5b4a3f21"}}],
    }  # fmt: skip
    ws = find_warnings("f", canonical_render(body))
    kinds = {(w.kind, w.field) for w in ws}
    assert ("timestamp", "messages[0].content") in kinds
    assert ("id", "messages[0].content") in kinds
    assert ("phone", "messages[0].content") in kinds
    assert ("name", "messages[0].content") in kinds
    assert ("id", "tools[0]") in kinds
    assert not any(w.field.startswith("messages[1]") for w in ws)  # not the top
    assert not any("{caller_name}" in w.text for w in ws)
    # Ordinary rules text is not flagged.
    plain = {"messages": [{"role": "system", "content": "Open Monday to Friday. " + RULES}]}
    assert find_warnings("p", canonical_render(plain)) == []


def test_cli_json_and_bad_files(tmp_path: Path) -> None:
    a = write(tmp_path, "a.json", top_body("Dana", "10:15"))
    bad1 = write(tmp_path, "bad1.json", {"prompt": "not chat"})
    bad2 = write(tmp_path, "bad2.json", "{not json")
    bad3 = write(tmp_path, "bad3.json", {"messages": [{"content": "no role"}]})
    b = write(tmp_path, "b.json", top_body("Eli", "11:40"))
    res = turnkit("prompt-lint", str(a), str(bad1), str(bad2), str(bad3), str(b), "--json")
    assert res.returncode == 1
    err = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(err) == 3, res.stderr
    assert "bad1.json" in err[0] and "'messages'" in err[0]
    assert "bad2.json" in err[1] and "not JSON" in err[1]
    assert "bad3.json" in err[2] and "messages[0].role" in err[2]
    assert "Traceback" not in res.stderr
    d = json.loads(res.stdout)
    assert d["unit"] == "chars" and [p["b"] for p in d["pairs"]] == [str(b)]
    assert d["first_divergence"]["field"] == "messages[0].content"
    assert {w["kind"] for w in d["warnings"]} >= {"timestamp", "name"}
    # Human output on good files: exit 0, a table and the warnings.
    res = turnkit("prompt-lint", str(a), str(b))
    assert res.returncode == 0, res.stderr
    assert "first difference" in res.stdout and "warning" in res.stdout


def test_engine_that_does_not_answer_falls_back_to_chars(tmp_path: Path) -> None:
    a = write(tmp_path, "a.json", laid_out("Dana"))
    b = write(tmp_path, "b.json", laid_out("Eli"))
    url = f"http://127.0.0.1:{closed_port()}/v1"
    res = turnkit("prompt-lint", str(a), str(b), "--json", "--base-url", url)
    assert res.returncode == 1
    assert "did not answer" in res.stderr and "chars" in res.stderr
    assert json.loads(res.stdout)["unit"] == "chars"


# --------------------------------------------------------------------------
# Real engine


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_llama_server() as base_url:
        yield base_url


def test_tokens_match_what_the_engine_bills_and_caches(engine: str, tmp_path: Path) -> None:
    bodies = [laid_out("Dana", "I need a cleaning."), laid_out("Eli", "Can I move my visit?")]
    paths = [write(tmp_path, f"{i}.json", b) for i, b in enumerate(bodies)]
    report = lint_files(paths, base_url=engine)
    d = report.as_dict()
    assert d["unit"] == "tokens" and d["method"] == "engine-template", d["errors"]

    async def send() -> list[tuple[int, int]]:
        async with ChatClient(engine, timeout_s=120, first_token_timeout_s=120) as c:
            out = []
            for b in bodies:
                r = await c.complete(b["messages"], tools=b["tools"], max_tokens=1)
                out.append((r.usage["prompt_tokens"], r.cached_tokens or 0))
            return out

    (p0, _), (p1, cached1) = asyncio.run(send())
    assert [f["length"] for f in d["files"]] == [p0, p1]
    pair = d["pairs"][0]
    # The engine served from cache exactly the prefix lint says is shared
    # (it may keep one token back to compute the next logits).
    assert pair["shared"] - 1 <= cached1 <= pair["shared"], (pair, cached1)
    assert pair["total"] == p1

    res = turnkit("prompt-lint", *map(str, paths), "--json", "--base-url", engine)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["pairs"][0]["shared"] == pair["shared"]
