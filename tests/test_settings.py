"""Issue 25: one TOML configuration (``--config FILE.toml``) for OverallMetrics' masks, the kernel
classes and the advisor's rules and checks; the three legacy INI files keep working."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perfcmp_core.advisor.rules import load_config
from perfcmp_core.compare.equivalence import load_equivalence
from perfcmp_core.compare.masks import load_masks
from perfcmp_core.errors import InputError
from perfcmp_core.settings import load_settings, read_settings

ROOT = Path(__file__).resolve().parents[1]
TOML = """
[masks]
fa = ["flash_attention", "my_attn"]
cube = []

[kernel.attention]
label = "attention"
names = ["flash", "fmha", "my_attn_kernel"]

[kernel.my_family]
label = "my family"
names = ["re:^zz_"]

[op.my_attention]
label = "my attention"
library = ["MyAttn"]

[advisor]
warmup_steps = 0

[rule.dit_matmul]
threshold = 60

[check.device_idle]
threshold = 45.5
direction_launch = "fuse"

[check.aicpu]
enabled = false
"""
INI_MASKS = "[OP_MASK]\nFA_MASK = flash_attention, my_attn\nCUBE_MASK =\n"
INI_EQUIVALENCE = """[kernel.attention]
label = attention
names = flash, fmha, my_attn_kernel

[kernel.my_family]
label = my family
names = re:^zz_

[op.my_attention]
label = my attention
library = MyAttn
"""
INI_ADVISOR = """[advisor]
warmup_steps = 0

[rule.dit_matmul]
threshold = 60

[check.device_idle]
threshold = 45.5
direction_launch = fuse

[check.aicpu]
enabled = no
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_one_toml_file_equals_the_three_ini_files(tmp_path: Path) -> None:
    s = read_settings(_write(tmp_path, "perfcmp.toml", TOML))
    masks = load_masks(_write(tmp_path, "masks.ini", INI_MASKS))
    advisor = load_config(_write(tmp_path, "advisor.ini", INI_ADVISOR))
    eq = load_equivalence(_write(tmp_path, "eq.ini", INI_EQUIVALENCE))
    assert s.masks == masks and s.masks.fa == ("flash_attention", "my_attn") and s.masks.cube == ()
    assert s.advisor.warmup_steps == advisor.warmup_steps == 0
    assert {r.key: r.threshold for r in s.advisor.rules} == {r.key: r.threshold for r in advisor.rules}
    assert s.advisor.checks.keys() == advisor.checks.keys() and "aicpu" not in s.advisor.checks
    assert s.advisor.checks["device_idle"].threshold == 45.5
    assert s.advisor.checks["device_idle"].direction_for("launch") == "fuse"
    assert [(k.id, k.label, k.names.items) for k in s.equivalence.kernels] == \
        [(k.id, k.label, k.names.items) for k in eq.kernels]
    assert s.equivalence.lookup["MyAttn"].label == "my attention"
    assert s.advisor_file and s.advisor_file.endswith("perfcmp.toml")


def test_a_toml_file_with_one_part_leaves_the_others_default(tmp_path: Path) -> None:
    s = read_settings(_write(tmp_path, "c.toml", "[check.syncs]\nthreshold = 3\n"))
    assert s.masks == load_masks(None) and s.advisor.checks["syncs"].threshold == 3
    assert [k.id for k in s.equivalence.kernels] == [k.id for k in load_equivalence().kernels]


@pytest.mark.parametrize("text, message", [
    ("[colours]\nx = 1\n", "unknown table(s) colours"),
    ("[masks]\nfa_mask = []\n", "[masks]: unknown key(s) fa_mask"),
    ("[kernel.gemm]\nnames = ['re:a{1,2}']\n", "contains a comma"),
    ("[check.gpu_melted]\nthreshold = 1\n", "unknown check [check.gpu_melted]"),
    ("[check.syncs]\nthreshold = 'many'\n", "not a number"),
    ("[rule.x\n", "invalid TOML"),
])
def test_mistakes_are_one_line_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, "bad.toml", text)
    with pytest.raises(InputError) as err:
        read_settings(path)
    assert message in str(err.value) and "bad.toml" in str(err.value) and "\n" not in str(err.value)


def test_legacy_ini_flags_keep_working_and_do_not_mix_with_toml(tmp_path: Path) -> None:
    legacy = load_settings(_write(tmp_path, "masks.ini", INI_MASKS), _write(tmp_path, "advisor.ini", INI_ADVISOR),
                           _write(tmp_path, "eq.ini", INI_EQUIVALENCE))
    assert legacy.masks.fa == ("flash_attention", "my_attn") and "aicpu" not in legacy.advisor.checks
    toml = _write(tmp_path, "perfcmp.toml", TOML)
    with pytest.raises(InputError, match="replaces --advisor-config and --equivalence"):
        load_settings(toml, str(tmp_path / "advisor.ini"))
    with pytest.raises(InputError, match="goes to --config"):
        load_settings(None, toml)


def test_cli_advise_reads_the_toml_configuration(tmp_path: Path) -> None:
    """``advise --config`` on the GPU fixture: a threshold of 100 syncs per step switches the
    syncs check off; without the file it trips."""
    profile = str(ROOT / "fixtures" / "gpu" / "base.pt.trace.json")
    cli = [sys.executable, "-m", "perfcmp_tui.cli", "advise", profile]
    plain = subprocess.run(cli, capture_output=True, text=True, check=True).stdout
    assert "Host-device syncs:" in plain
    toml = _write(tmp_path, "perfcmp.toml", "[check.syncs]\nthreshold = 100\n")
    quiet = subprocess.run([*cli, "--config", toml], capture_output=True, text=True, check=True).stdout
    assert "Host-device syncs:" not in quiet and "Workload:" in quiet
    bad = _write(tmp_path, "bad.toml", "[colours]\n")
    run = subprocess.run([*cli, "--config", bad], capture_output=True, text=True)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "bad.toml" in run.stderr
