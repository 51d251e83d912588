"""MkDocs hooks: publish the distributions' READMEs as pages of the site, links intact.

Each distribution's README is the page people read on PyPI and in the repository, so the site
publishes those files as they are instead of keeping a second copy under ``docs/``. Their
relative links point at repository paths (``../../core/README.md``, ``../tests/chaos/...``):
a link to a file the site publishes is rewritten to that page; a link to any other file of the
repository (source, tests) becomes the path in code, since the site carries no source. A link
to a published page that does not exist is left alone, so ``mkdocs build --strict`` still
reports it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]

# repository path of a README -> its path in the site
PUBLISHED = {
    "README.md": "repository.md",
    "core/README.md": "guide.md",
    "conformance/README.md": "drivers/authoring.md",
    "drivers/sqlite/README.md": "drivers/sqlite.md",
    "drivers/postgres/README.md": "drivers/postgres.md",
    "drivers/mysql/README.md": "drivers/mysql.md",
    "examples/third-party-driver/README.md": "drivers/example-litestore.md",
    "examples/pg8000-driver/README.md": "drivers/example-pg8000.md",
    "bench/README.md": "bench-harness.md",
}
# contrib/NAME/README.md -> contrib/NAME.md, found like the noxfile finds them
for readme in sorted(ROOT.glob("contrib/*/README.md")):
    PUBLISHED[readme.relative_to(ROOT).as_posix()] = f"contrib/{readme.parent.name}.md"

# Pictures a published README shows (contrib/NAME/docs/*.png: the dashboard's screenshots),
# published at their repository path; the README's image links are rewritten to them.
IMAGES = {
    image.relative_to(ROOT).as_posix(): image.relative_to(ROOT).as_posix()
    for image in sorted(ROOT.glob("contrib/*/docs/*.png"))
}

_SOURCE_OF = {site: repo for repo, site in PUBLISHED.items()}
_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s:#]+)\)")


def on_files(files: Files, config: Any) -> Files:
    """Add every published README as a generated page."""
    for repo_path, site_path in PUBLISHED.items():
        source = ROOT / repo_path
        if source.exists():
            files.append(
                File.generated(config, site_path, content=source.read_text(encoding="utf-8"))
            )
    for repo_path, site_path in IMAGES.items():
        files.append(File.generated(config, site_path, content=(ROOT / repo_path).read_bytes()))
    return files


def _repo_path_of(page_src: str) -> str:
    """Where the page's markdown lives in the repository."""
    return _SOURCE_OF.get(page_src, f"docs/{page_src}")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Rewrite links that leave ``docs/`` into links to the site or to code spans."""
    here = _repo_path_of(page.file.src_uri)
    here_dir = posixpath.dirname(here)
    site_dir = posixpath.dirname(page.file.src_uri)

    def rewrite(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return match.group(0)
        path, _, anchor = target.partition("#")
        repo_target = posixpath.normpath(posixpath.join(here_dir, path))
        if repo_target.startswith("docs/"):
            site_target = repo_target[len("docs/") :]
        elif repo_target in PUBLISHED:
            site_target = PUBLISHED[repo_target]
        elif posixpath.join(repo_target, "README.md") in PUBLISHED:
            site_target = PUBLISHED[posixpath.join(repo_target, "README.md")]
        else:
            if text.strip("`") == repo_target:
                return f"`{repo_target}`"
            return f"{text} (`{repo_target}`)"
        relative = posixpath.relpath(site_target, site_dir or ".")
        return f"[{text}]({relative}{'#' + anchor if anchor else ''})"

    def rewrite_image(match: re.Match[str]) -> str:
        repo_target = posixpath.normpath(posixpath.join(here_dir, match.group(2)))
        if repo_target not in IMAGES:
            return match.group(0)  # left alone: --strict reports it if it is missing
        relative = posixpath.relpath(IMAGES[repo_target], site_dir or ".")
        return f"![{match.group(1)}]({relative})"

    return _IMAGE.sub(rewrite_image, _LINK.sub(rewrite, markdown))
