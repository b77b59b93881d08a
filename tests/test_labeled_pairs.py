"""The labeled pairs the compile saves for ``program index`` (``program.adaptation.labeled``): read
back as written, fitted to the same judges, and a missing or broken file is one clear error."""

from __future__ import annotations

import json

import numpy as np
import pytest

from program.adaptation.fit import SourcePairs, fit_judges
from program.adaptation.labeled import LABELED_FILE, LabeledPairsError, load_labeled, save_labeled
from program.adaptation.pairs import Pairs
from program.judges import save_judges
from program.judgments import PASSAGE, STRIP, SUPPORT


def _pairs(judgment, n: int, rng, cues: bool = True, group: str = "q") -> Pairs:
    pairs = Pairs() if cues else Pairs(cues=None)
    width = len(judgment.feature_names)
    for i in range(n):
        label = i % 2
        dense = (rng.random(width) + label * 0.3).tolist()
        pairs.add(dense, [f"who|w{i % 5}", f"*|w{i % 3}"] if cues else None, label, f"{group}-{i // 6}",
                  target=0.5 if i % 7 == 0 else None, text=("question", f"passage {i}"))
    return pairs


def _source(name: str, seed: int, claims: bool = False) -> SourcePairs:
    rng = np.random.default_rng(seed)
    passage = _pairs(PASSAGE, 60, rng, group=f"{name}-query")
    expected = {g: "correct" if k % 2 else "incorrect" for k, g in enumerate(dict.fromkeys(passage.groups))}
    return SourcePairs(name, None, passage, _pairs(STRIP, 40, rng), _pairs(SUPPORT, 48, rng, cues=False), expected,
                       claims=_pairs(SUPPORT, 30, rng, cues=False) if claims else None, corpus=f"{name}-corpus",
                       counts={"asked": 3, "kept": 2} if not claims else {})


@pytest.fixture
def sources():
    return [_source("popqa", 0, claims=True), _source("handbook", 1)]


def test_the_saved_pairs_read_back_as_written_but_their_texts(tmp_path, sources):
    path = save_labeled(sources, tmp_path)
    assert path == tmp_path / LABELED_FILE
    back = load_labeled(tmp_path)
    assert [s.name for s in back] == ["popqa", "handbook"] and [s.key() for s in back] == ["popqa-corpus",
                                                                                          "handbook-corpus"]
    for old, new in zip(sources, back):
        assert (new.expected, new.support_weight, new.counts, new.kb) == (old.expected, old.support_weight,
                                                                          old.counts, None)
        for kind in ("passage", "strip", "support", "claims"):
            a, b = getattr(old, kind), getattr(new, kind)
            if a is None:
                assert b is None
                continue
            assert (b.dense, b.labels, b.targets, b.groups, b.cues) == (a.dense, a.labels, a.targets, a.groups, a.cues)
            assert b.texts == [None] * len(a)


def test_a_source_left_out_is_not_read(tmp_path, sources):
    save_labeled(sources, tmp_path)
    assert [s.name for s in load_labeled(tmp_path, leave_out=("handbook",))] == ["popqa"]


def test_the_judges_fitted_on_the_saved_pairs_are_those_fitted_on_the_built_ones(tmp_path, sources):
    save_labeled(sources, tmp_path)
    built = save_judges(fit_judges(sources, log=lambda m: None), tmp_path / "built")
    saved = save_judges(fit_judges(load_labeled(tmp_path), log=lambda m: None), tmp_path / "saved")
    assert json.loads(built.read_text()) == json.loads(saved.read_text())


def test_no_saved_pairs_is_one_line_naming_the_file_and_the_command(tmp_path):
    with pytest.raises(LabeledPairsError) as caught:
        load_labeled(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path / LABELED_FILE) in message
    assert f"python -m optimize.training.sources --out {tmp_path}" in message


def test_a_file_cut_in_half_is_one_line_not_a_traceback(tmp_path, sources):
    path = save_labeled(sources, tmp_path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(LabeledPairsError, match="is unreadable .*make it again: python -m optimize.training.sources"):
        load_labeled(tmp_path)


def test_the_committed_pairs_are_built_from_todays_labels_and_code():
    # pairs whose features an older features.py computed would be fitted beside rows the current
    # one computes: a knowledge base adapted from them gets judges that read two different signals
    from optimize.training.sources import sources_stamp
    from program.adaptation.labeled import saved_stamp
    from program.app.compiled import COMPILED_DIR

    assert saved_stamp(COMPILED_DIR) == sources_stamp(()), (
        "compiled/labeled_pairs.npz is stale: python -m optimize.training.sources --out compiled")
    names = [s.name for s in load_labeled(COMPILED_DIR)]
    assert names[0] == "popqa" and "kubernetes" in names and "owasp" not in names  # owasp only measures


def test_the_stamp_names_files_by_their_place_in_the_project_not_on_the_disk(tmp_path):
    # CI clones to /check/work/main: a stamp that hashed /work/main/... called the committed pairs stale
    from optimize.training.sources import files_stamp

    stamps = []
    for clone in ("here", "elsewhere/deeper"):
        root = tmp_path / clone
        (root / "eval_sets").mkdir(parents=True)
        (root / "eval_sets" / "rows.jsonl").write_text('{"q": 1}\n')
        stamps.append(files_stamp([root / "eval_sets" / "rows.jsonl", root / "gone.md"], root))
    assert stamps[0] == stamps[1]
    (tmp_path / "here" / "eval_sets" / "rows.jsonl").write_text('{"q": 2}\n')
    assert files_stamp([tmp_path / "here" / "eval_sets" / "rows.jsonl", tmp_path / "here" / "gone.md"],
                       tmp_path / "here") != stamps[0]
