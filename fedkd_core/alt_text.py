"""A Sphinx extension of the book (``book/_config.yml``): every figure a chapter draws gets an alt
text that describes it, not its file name (issue 61).

A notebook's figure reaches the page as an image whose alt text MyST-NB sets to nothing (HTML
writers then fall back to the file's path). Each figure of the book is followed by its caption,
``<p class="fedkd-caption">`` (:func:`fedkd_core.plots.caption`), which says what the panels, lines
and colours show: that caption, as plain text, becomes the image's alt text. A figure without a
caption before the next figure is described by its section: "A figure of the section "...""."""

from __future__ import annotations

import html
import re

CAPTION = "fedkd-caption"
MAX_CHARACTERS = 400


def caption_text(raw: str) -> str:
    """The text of a ``<p class="fedkd-caption">`` block (tags dropped, entities read), or ""."""
    found = re.search(rf'<p class="{CAPTION}">(.*?)</p>', raw, re.S)
    if not found:
        return ""
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())
    if len(text) > MAX_CHARACTERS:  # at a sentence's end where one falls in the last third
        cut = text.rfind(". ", MAX_CHARACTERS * 2 // 3, MAX_CHARACTERS)
        text = text[:cut + 1] if cut > 0 else text[:MAX_CHARACTERS].rsplit(" ", 1)[0] + " …"
    return text


def describe_images(doctree) -> int:
    """Set the alt text of every image of ``doctree`` that has none (or its path): the caption that
    follows it before the next image, else its section's title. Returns how many it set."""
    from docutils import nodes

    order = [node for node in doctree.findall() if isinstance(node, (nodes.image, nodes.raw, nodes.title))]
    changed = 0
    section = ""
    for i, node in enumerate(order):
        if isinstance(node, nodes.title):
            section = node.astext()
            continue
        if not isinstance(node, nodes.image):
            continue
        alt = str(node.get("alt", "") or "")
        if alt and alt != node.get("uri") and "/" not in alt:
            continue
        text = ""
        for later in order[i + 1:]:
            if isinstance(later, nodes.image):
                break
            if isinstance(later, nodes.raw) and CAPTION in later.astext():
                text = caption_text(later.astext())
                break
        node["alt"] = text or (f"A figure of the section “{section}”" if section else "A figure of this page")
        changed += 1
    return changed


def _on_doctree_resolved(app, doctree, docname) -> None:
    describe_images(doctree)


def setup(app):
    app.connect("doctree-resolved", _on_doctree_resolved)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
