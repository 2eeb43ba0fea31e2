"""The run request: built once by the command line, configs read once, the same in every process."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from perfcmp_core.advisor import rules
from perfcmp_core.compare import equivalence, masks
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.request import RunRequest
from perfcmp_tui.cli import main

ROOT = Path(__file__).resolve().parents[1]
BASE = str(ROOT / "fixtures" / "npu_text" / "base_ascend_pt")
COMP = str(ROOT / "fixtures" / "npu_text" / "comp_ascend_pt")


def _configs(tmp_path: Path) -> tuple[Path, Path, Path]:
    mask = tmp_path / "masks.ini"
    mask.write_text("[OP_MASK]\nFA_MASK = my_attn\n")
    advisor = tmp_path / "advisor.ini"
    advisor.write_text("[advisor]\nwarmup_steps = 0\n")
    table = tmp_path / "equivalence.ini"
    table.write_text("[op.mine]\nlabel = my attention\nlibrary = my::attn\n"
                     "[kernel.mine]\nlabel = my kernels\nnames = re:^my_\n")
    return mask, advisor, table


def test_request_reads_every_config_and_survives_pickling(tmp_path: Path) -> None:
    mask, advisor, table = _configs(tmp_path)
    request = RunRequest.read(BASE, COMP, LoadOptions(step=2), LoadOptions(), CompareOptions(),
                              mask_file=str(mask), advisor_file=str(advisor),
                              equivalence_file=str(table))
    assert request.masks.fa == ("my_attn",)
    assert request.advisor.warmup_steps == 0 and request.advisor_file == str(advisor)
    assert request.equivalence.lookup["my::attn"].label == "my attention"
    back = pickle.loads(pickle.dumps(request))
    assert back.masks == request.masks and back.base_opts == LoadOptions(step=2)
    assert back.advisor.rules == request.advisor.rules
    assert back.advisor.source == str(advisor)
    assert back.equivalence.lookup["my::attn"].label == "my attention"
    assert back.equivalence.kernels[0].names.regex.pattern == request.equivalence.kernels[0].names.regex.pattern


def test_export_reads_each_config_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    mask, advisor, table = _configs(tmp_path)
    calls: list[object] = []
    real_masks, real_config = masks.load_masks, rules.load_config
    real_table = equivalence.load_equivalence
    monkeypatch.setattr(masks, "load_masks", lambda p: calls.append(p) or real_masks(p))
    monkeypatch.setattr(rules, "load_config", lambda p: calls.append(p) or real_config(p))
    monkeypatch.setattr(equivalence, "load_equivalence", lambda p: calls.append(p) or real_table(p))
    code = main(["export", BASE, COMP, "--no-cache", "-o", str(tmp_path / "out"),
                 "--config", str(mask), "--advisor-config", str(advisor),
                 "--equivalence", str(table)])
    assert code == 0, capsys.readouterr().err
    assert calls == [str(mask), str(advisor), str(table)]


def test_a_bad_config_fails_before_any_profile_is_opened(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.ini"
    bad.write_text("[OP_MASK]\nFA_MASKS = typo\n")
    code = main(["summary", str(tmp_path / "no-such-base"), COMP, "--config", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and f"{bad}: unknown key(s) in [OP_MASK]: FA_MASKS" in err
    bad.write_text("[op.x]\ntorch = a\n[kernel.k]\nnames = re:([\n")
    code = main(["summary", str(tmp_path / "no-such-base"), COMP, "--equivalence", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and f"{bad}: invalid regular expression" in err
