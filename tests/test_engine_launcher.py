"""scripts/llama_server.py: the launcher of the real local engine.

The engine itself is exercised by every test that uses ``running_llama_server``;
these check what the launcher decides before it starts one (the CPU flags the
pinned wheel needs, a bad model path) and that the pinned wheel is the
portable AVX2 build, never one that needs AVX-512.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from engine import LAUNCHER, require_engine

_spec = importlib.util.spec_from_file_location("llama_server", LAUNCHER)
assert _spec is not None and _spec.loader is not None
launcher = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(launcher)  # imports xllamacpp only in main()

HASWELL = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c bmi1 bmi2 popcnt"


def test_missing_cpu_flags_names_each_one(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nflags\t\t: {HASWELL}\n")
    assert launcher.missing_cpu_flags(info) == []  # an AVX2 CPU without AVX-512 is enough
    info.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 ssse3 avx\n")
    assert launcher.missing_cpu_flags(info) == ["avx2", "fma", "f16c", "bmi2"]


def test_a_missing_model_is_one_line_exit_2(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, str(LAUNCHER), "-m", str(tmp_path / "none.gguf"), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "--model" in res.stderr
    assert "Traceback" not in res.stderr


def test_pinned_wheel_is_the_portable_cpu_build() -> None:
    """The wheel says what it was compiled for: every flag the launcher checks
    and no AVX-512 / AMX (which would SIGILL on CPUs without them)."""
    if importlib.util.find_spec("xllamacpp") is None:
        require_engine()  # skips, or fails under TURNKIT_REQUIRE_ENGINE=1
        pytest.skip("xllamacpp not installed")
    import xllamacpp

    info = xllamacpp.get_system_info()
    built = {part.split("=")[0].strip() for part in info.split("|") if "= 1" in part}
    for flag in launcher.REQUIRED_X86_FLAGS:
        assert any(b.endswith(flag.upper()) for b in built), (flag, info)
    assert not any("AVX512" in b or "AMX" in b for b in built), info
