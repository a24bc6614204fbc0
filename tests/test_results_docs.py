"""Every relative link and image in README.md and docs/**/*.md resolves to a file in the tree.

Recorded results live in docs/results/ (pages, figures, one JSON per benchmark in data/); older runs and raw
logs were removed from the tree and are cited by the git commit that holds them. These checks keep the docs
from pointing at a result that is gone: a markdown link or image, a `docs/results/...` path in backticks, and
any mention of the old `benchmarks/results/` outside docs/results/ that is not such a git citation.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
RESULTS_PATH = re.compile(r"`(docs/results/[^`\s]+)`")
OLD_RESULTS = re.compile(r"benchmarks/results/")
GIT_CITATION = re.compile(r"`benchmarks/results/[^`\s]+` at git `[0-9a-f]{7,40}`")


def doc_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def broken_links(md: Path, root: Path) -> list[str]:
    """Relative link/image targets and backticked docs/results paths in `md` that name no existing file."""
    text = md.read_text(encoding="utf-8")
    bad = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same page
        path = target.split("#", 1)[0]
        if not (md.parent / path).exists():
            bad.append(target)
    bad += [p for p in RESULTS_PATH.findall(text) if not (root / p.rstrip("/")).exists()]
    return bad


def stale_result_mentions(md: Path) -> list[str]:
    """Lines naming benchmarks/results/ other than as `benchmarks/results/X` at git `HASH`."""
    lines = md.read_text(encoding="utf-8").splitlines()
    return [ln for ln in lines if OLD_RESULTS.search(GIT_CITATION.sub("", ln))]


def test_every_relative_link_and_image_in_the_docs_resolves():
    bad = {str(md.relative_to(ROOT)): b for md in doc_files(ROOT) if (b := broken_links(md, ROOT))}
    assert not bad, f"links to missing files: {bad}"


def test_the_docs_cite_removed_results_only_by_git_commit():
    results = ROOT / "docs" / "results"
    files = [md for md in doc_files(ROOT) if results not in md.parents]
    bad = {str(md.relative_to(ROOT)): b for md in files if (b := stale_result_mentions(md))}
    assert not bad, f"mentions of benchmarks/results/ (moved to docs/results/): {bad}"


def test_the_results_index_lists_every_page():
    results = ROOT / "docs" / "results"
    index = (results / "README.md").read_text(encoding="utf-8")
    listed = set(LINK.findall(index))
    pages = {p.name for p in results.glob("*.md")} - {"README.md"}
    assert pages and pages <= listed, f"pages missing from docs/results/README.md: {sorted(pages - listed)}"


def test_the_checks_catch_a_missing_target(tmp_path):
    # The checker itself: a link to a removed result, an image, a backticked path and an old-location mention.
    (tmp_path / "docs" / "results" / "data").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "kept.png").write_bytes(b"")
    (tmp_path / "docs" / "results" / "data" / "kept.json").write_text("{}")
    md = tmp_path / "docs" / "page.md"
    md.write_text(
        "[ok](results/kept.png) ![ok](results/kept.png#x) [web](https://example.org/a.md) [here](#anchor)\n"
        "[gone](results/data/old_run.json) ![gone](results/gone.png)\n"
        "`docs/results/data/kept.json` `docs/results/data/missing.json`\n"
        "`benchmarks/results/old.json` at git `abc1234`\n"
        "see benchmarks/results/models.md\n"
    )
    assert broken_links(md, tmp_path) == [
        "results/data/old_run.json",
        "results/gone.png",
        "docs/results/data/missing.json",
    ]
    assert stale_result_mentions(md) == ["see benchmarks/results/models.md"]
