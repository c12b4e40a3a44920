"""bench/TLC_MEMORY.md reads back as the rows bench/tlc_memory.py wrote (so `--merge` can replace
or add a file's rows without the hour-long run), and its summary is recounted over the merged
rows. No TLC runs here: the rows are the file's own."""

import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import tlc_memory  # noqa: E402

TEXT = open(os.path.join(ROOT, "bench", "TLC_MEMORY.md")).read()


def _section(rows, without, first, merged):
    return "\n".join(tlc_memory.section(rows, without, first[0], first[1], merged))


def test_the_written_file_reads_back_and_renders_as_written():
    rows, without, first, merged = tlc_memory.read_back(TEXT)
    assert rows and first is not None
    assert _section(rows, without, first, merged).strip() == TEXT.split("\n", 2)[2].strip()


def test_a_merged_row_replaces_its_kernel_and_a_new_files_row_is_added_in_path_order():
    rows, without, first, merged = tlc_memory.read_back(TEXT)
    gluon = next(r for r in rows if r["ref"].startswith("examples/gluon/"))
    changed = dict(gluon, tlc="bounded", agree=False, states_agree=None,
                   explore_why="", tlc_why="TLC time limit reached")
    changed.pop("odd_line", None)
    new = {"ref": "examples/cute/a_new_file.py::a_new", "kernel": "a_new",
           "frontend": "cute", "explore_all": "verified", "open": [], "explore": "verified",
           "tlc": "verified", "t_tlc": 1.0, "agree": True, "states_agree": True}
    out = tlc_memory.merge(rows, [changed, new])
    assert len(out) == len(rows) + 1
    assert [tlc_memory._name(r) for r in out if r is not new] == \
        [tlc_memory._name(r) for r in rows]
    assert out[out.index(new) + 1]["ref"] > new["ref"]          # before the later files
    text = _section(out, without, first, merged + ["Rows of `x --merge` replaced."])
    agree = sum(r["agree"] for r in out)
    assert f"**{agree} of {len(rows) + 1}**" in text
    cute = [r for r in out if r["frontend"] == "cute"]
    assert f"| cute | {len(cute)} | {sum(r['agree'] for r in cute)} | 0 |" in text
    assert "Rows of `x --merge` replaced." in text
    assert f"{tlc_memory._name(gluon)} | " in text and "TLC bounded (TLC time limit" in text


def test_the_tla_doc_states_the_files_agreement():
    rows, _, _, _ = tlc_memory.read_back(TEXT)
    both = [r for r in rows if r["states_agree"] is not None]
    doc = " ".join(open(os.path.join(ROOT, "docs", "tla.md")).read().split())
    agree = sum(r["agree"] for r in rows)
    stated = (f"agree on all {len(rows)} kernels" if agree == len(rows)
              else f"agree on {agree} of the {len(rows)} kernels")
    assert stated in doc
    assert f"equal state counts on all {len(both)} verified by both" in doc
    assert all(r["states_agree"] for r in both)
