"""The documentation against what it describes: docs/, mkdocs.yml and README.md.

``mkdocs build --strict`` (``make docs``) checks the links between pages and the API pages; the
checks here need no MkDocs: the layer table of docs/architecture.md is the one
``tests/test_layers.py`` enforces, every page is in the site's nav, and the README stays short
and links to every page. Each check is a function returning its differences, and a synthetic
page shows that the layer check can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.test_layers import DGLCTL_LAYERS, LAYERS, SAME_LAYER_IMPORTS, Group

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
MKDOCS = REPO / "mkdocs.yml"
ARCHITECTURE = DOCS / "architecture.md"
# bench/figures.py's output of a recorded run, kept as it was written (its figures.md is in
# the nav, but nothing under this folder has to be).
RECORDED_RUN = DOCS / "figures"
README_MAX_LINES = 150

# The tables the page's ```layers block must equal: per package, its groups and the imports
# allowed between two groups of one layer (check_layers gets no exceptions for dglctl).
EXPECTED = {
    "runtime": (LAYERS, SAME_LAYER_IMPORTS),
    "dglctl": (DGLCTL_LAYERS, set()),
}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


# -- the layer diagram of docs/architecture.md ---------------------------------------------

def layer_block(text: str) -> str:
    """The body of the page's one ```layers fenced block."""
    blocks = re.findall(r"^```layers[ \t]*\n(.*?)^```", text, re.S | re.M)
    if len(blocks) != 1:
        raise ValueError(f"expected one ```layers block, found {len(blocks)}")
    return blocks[0]


def parse_layers(text: str) -> dict[str, tuple[tuple[Group, ...], set[tuple[str, str]]]]:
    """Per package (a ``[name]`` line), its groups and same-layer imports, from the block.

    A group line is ``LAYER NAME MODULE...``, optionally ending in ``only: GROUP...`` (or
    ``only: nothing``); an indented line continues the modules of the group above;
    ``same-layer: a -> b, c -> d`` lists allowed imports between groups of one layer; ``#``
    starts a comment."""
    packages: dict[str, tuple[list[Group], set[tuple[str, str]]]] = {}
    current = None
    for n, raw in enumerate(layer_block(text).splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if m := re.fullmatch(r"\[([\w.-]+)\]", line.strip()):
            current = packages.setdefault(m[1], ([], set()))
            continue
        if current is None:
            raise ValueError(f"layers line {n}: {raw.strip()!r} comes before a [package] line")
        groups, same_layer = current
        if line.startswith("same-layer:"):
            for pair in line.split(":", 1)[1].split(","):
                words = pair.split()
                if len(words) != 3 or words[1] != "->":
                    raise ValueError(f"layers line {n}: {pair.strip()!r} is not 'a -> b'")
                same_layer.add((words[0], words[2]))
            continue
        words, only = line.split(), None
        if "only:" in words:
            i = words.index("only:")
            words, rest = words[:i], words[i + 1:]
            only = () if rest == ["nothing"] else tuple(rest)
        if line[0].isspace():
            if not groups:
                raise ValueError(f"layers line {n}: a continuation line with no group above")
            g = groups[-1]
            groups[-1] = Group(g.name, g.layer, g.modules + tuple(words),
                               g.only if only is None else only)
            continue
        if len(words) < 2 or not words[0].isdigit():
            raise ValueError(f"layers line {n}: {raw.strip()!r} is not 'LAYER NAME MODULE...'")
        groups.append(Group(words[1], int(words[0]), tuple(words[2:]), only))
    return {name: (tuple(groups), same) for name, (groups, same) in packages.items()}


def _show(g: Group) -> str:
    only = "" if g.only is None else f" only: {' '.join(g.only) or 'nothing'}"
    return f"{g.layer} {g.name} {' '.join(g.modules)}{only}"


def layer_differences(text: str, expected=EXPECTED) -> list[str]:
    """How the page's layer block differs from ``expected`` (tests/test_layers.py's tables)."""
    found = parse_layers(text)
    out = [f"[{name}]: the page lists a package tests/test_layers.py has no table for"
           for name in sorted(set(found) - set(expected))]
    for package, (want_groups, want_same) in expected.items():
        if package not in found:
            out.append(f"[{package}]: missing from the page")
            continue
        got_groups, got_same = found[package]
        got = {g.name: g for g in got_groups}
        want = {g.name: g for g in want_groups}
        for name in want.keys() - got.keys():
            out.append(f"[{package}] group {name!r} is missing from the page: {_show(want[name])}")
        for name in got.keys() - want.keys():
            out.append(f"[{package}] group {name!r} is not in tests/test_layers.py")
        for name in want.keys() & got.keys():
            if got[name] != want[name]:
                out.append(f"[{package}] group {name!r}: the page has {_show(got[name])!r}, "
                           f"tests/test_layers.py {_show(want[name])!r}")
        order_got = [g.name for g in got_groups if g.name in want]
        order_want = [g.name for g in want_groups if g.name in got]
        if order_got != order_want:
            out.append(f"[{package}] groups in another order: the page {order_got}, "
                       f"tests/test_layers.py {order_want}")
        if len(got) != len(got_groups):
            out.append(f"[{package}] a group name appears twice on the page")
        if got_same != set(want_same):
            out.append(f"[{package}] same-layer imports: the page {sorted(got_same)}, "
                       f"tests/test_layers.py {sorted(want_same)}")
    return sorted(out)


def test_the_architecture_page_has_the_layers_of_the_tests():
    differences = layer_differences(ARCHITECTURE.read_text())
    assert not differences, (
        f"docs/architecture.md's ```layers block differs from tests/test_layers.py in "
        f"{len(differences)} place(s); change the page with the rules:\n" + "\n".join(differences))


def test_a_page_that_drifted_is_reported():
    page = ARCHITECTURE.read_text()
    drifted = (page
               .replace("3  nn                runtime.nn.*  only: nn block",
                        "2  nn                runtime.nn.*  only: nn")
               .replace(" runtime.error_file", "")
               .replace("0  package           dglctl\n",
                        "0  package           dglctl\n1  gone              dglctl.gone\n")
               .replace("same-layer: store -> kernels, store -> draws, draws -> kernels",
                        "same-layer: store -> kernels"))
    assert drifted.count("\n") == page.count("\n") + 1, "the page's block changed: update the test"
    differences = layer_differences(drifted)
    assert any("'nn'" in d and "2 nn runtime.nn.* only: nn'" in d for d in differences)
    assert any("'base'" in d and "runtime.error_file" in d for d in differences)
    assert any("'gone' is not in tests/test_layers.py" in d for d in differences)
    assert any("same-layer" in d and "draws" in d for d in differences)
    assert len(differences) == 4, differences
    # Order, a missing group and a missing package are reported too.
    loader = "4  loader            runtime.loader.*\n"
    facade = "5  facade            runtime  only: nothing\n"
    swapped = page.replace(loader + facade, facade + loader)
    assert swapped != page
    assert any("another order" in d for d in layer_differences(swapped))
    assert any("missing from the page" in d
               for d in layer_differences(page.replace("4  jobs              dglctl.jobs.*\n", "")))
    assert layer_differences(page.replace("[dglctl]", "[dglctl-old]")) == [
        "[dglctl-old]: the page lists a package tests/test_layers.py has no table for",
        "[dglctl]: missing from the page",
    ]


@pytest.mark.parametrize("text, error", [
    ("no block here", "expected one ```layers block, found 0"),
    ("```layers\n0 base runtime.errors\n```\n", "comes before a [package] line"),
    ("```layers\n[runtime]\nbase 0 runtime.errors\n```\n", "is not 'LAYER NAME MODULE...'"),
    ("```layers\n[runtime]\nsame-layer: store kernels\n```\n", "is not 'a -> b'"),
], ids=["no-block", "no-package", "no-layer", "bad-pair"])
def test_a_malformed_block_is_an_error(text, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        parse_layers(text)


# -- the site's nav --------------------------------------------------------------------------

class _Loader(yaml.SafeLoader):
    """Reads mkdocs.yml as data: tags such as ``!!python/name:`` (MkDocs extensions' config)
    load as None instead of failing."""


_Loader.add_multi_constructor("", lambda loader, suffix, node: None)


def mkdocs_config() -> dict:
    return yaml.load(MKDOCS.read_text(), Loader=_Loader)


def nav_pages(nav) -> list[str]:
    """Every page of a MkDocs nav (``- Title: page.md``, nested sections, bare ``- page.md``)."""
    if isinstance(nav, str):
        return [] if re.match(r"[a-z]+://", nav) else [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in nav_pages(value)]
    return []


def docs_pages() -> set[str]:
    return {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
            if RECORDED_RUN not in p.parents}


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    config = mkdocs_config()
    assert config.get("docs_dir", "docs") == "docs"
    nav = nav_pages(config["nav"])
    assert len(nav) == len(set(nav)), f"pages twice in the nav: {sorted(nav)}"
    missing = sorted(docs_pages() - set(nav))
    assert not missing, f"pages of docs/ missing from mkdocs.yml's nav: {missing}"
    gone = [p for p in nav if not (DOCS / p).is_file()]
    assert not gone, f"nav entries of mkdocs.yml with no page in docs/: {gone}"


def test_the_api_pages_are_generated_from_docstrings():
    for page in (p for p in docs_pages() if p.startswith("api/")):
        assert re.search(r"^::: [\w.]+$", (DOCS / page).read_text(), re.M), (
            f"docs/{page} has no mkdocstrings directive (::: module.Name)")
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in mkdocs_config()["plugins"]]
    assert "mkdocstrings" in plugins


# -- the README ------------------------------------------------------------------------------

def readme_links() -> set[str]:
    return {link.split("#", 1)[0] for link in LINK.findall(README.read_text())
            if not re.match(r"[a-z]+:", link)}


def test_the_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to a page "
        "of docs/ and link it")


def test_the_readme_links_every_page():
    links = readme_links()
    missing = [p for p in nav_pages(mkdocs_config()["nav"]) if f"docs/{p}" not in links]
    assert not missing, f"pages of the nav the README does not link (as docs/PAGE.md): {missing}"
    broken = sorted(link for link in links if link and not (REPO / link).exists())
    assert not broken, f"README links to files that do not exist: {broken}"


def test_the_readme_names_the_two_commands():
    text = README.read_text()
    commands = text.split("## The two commands", 1)[1].split("```")[1]
    assert re.search(r"^make demo\b", commands, re.M) and re.search(r"^make test\b", commands, re.M)


def _section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_copies_of_the_readme_agree_with_the_pages():
    """The README repeats the tour of docs/index.md (the migration table is only in
    docs/migrating-from-dgl.md, where tests/compat/test_migration_table.py reads it)."""
    readme, index = README.read_text(), (DOCS / "index.md").read_text()
    tour = "## A five-minute tour"
    assert _section(readme, tour).split("```")[1] == _section(index, tour).split("```")[1]


def test_the_docs_cite_no_file_outside_the_repository():
    """DESIGN.md and REFERENCE.md lie outside the repository; what the code takes from them is in
    docs/architecture.md and docs/reference.md."""
    for path in [README, *sorted(DOCS.rglob("*.md"))]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not re.search(r"\b(DESIGN|REFERENCE)\.md\b", line), (
                f"{path.relative_to(REPO)}:{n} cites a file outside the repository: {line}")
