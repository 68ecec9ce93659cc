"""PDF typography: headings set apart by font size or weight, and words hyphenated at line ends.

pypdf's text visitor reports each run of text with its font and matrices, and the runs joined are
exactly the page's extracted text, so every line gets a style: the font size most of its letters
are set in and the share of them in a bold face. The document's body size is the size most
letters are set in. A line is a heading by typography when it is short, reads like a title and is
set larger than the body, or bold at body size; one or two consecutive heading lines of the same
style are one wrapped heading, a longer run of them is emphasised prose (a bold warning), not a
heading. Levels follow the sizes: the largest heading size is level 1.

A word split at a line end ("recom-" / "mendation") is joined when the document supports it; see
`dehyphenate`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from evidence.ingest.parsers.layout import leader_dots

#: A heading is at least this much larger than the body text (11 pt body → 12.65 pt).
SIZE_RATIO = 1.15
#: Share of a line's letters in a bold face for the line to count as bold.
BOLD_SHARE = 0.9
#: A typographic heading is short: this many characters and words at most.
MAX_HEADING_CHARS = 100
MAX_HEADING_WORDS = 14
#: More consecutive heading-styled lines than this are emphasised prose, not a wrapped heading.
MAX_HEADING_LINES = 2
_BOLD_FACE = re.compile(r"bold|semibold|demi|black|heavy", re.IGNORECASE)
#: TeX's bold faces say so only in their short names: Computer Modern's CMBX10, CMB10, CMSSBX10,
#: CMBXTI10 and the EC/cm-super (T1) ones SFBX1000, SFBI1000, SFSX1000 (sans bold), SFXC (bold caps).
_TEX_BOLD_FACE = re.compile(r"(?:^|[+/])(?:cm|sf|ec)(?:[a-z]*b[a-z]*|sx|xc)\d", re.IGNORECASE)
#: A description list's term (or a run-in heading) opening a line in bold: at most this many words.
MAX_TERM_WORDS = 4
#: Typewriter faces code listings are set in (Courier, TeX's CMTT/LMMono, "… Mono", "… Code"):
#: TeX's fonts leave the descriptor's fixed-pitch flag unset, so the name is read too.
_MONO_FACE = re.compile(
    r"courier|mono|typewriter|cmtt|lmtt|txtt|consol|menlo|inconsolata|code|fixed", re.IGNORECASE
)
#: The descriptor's FixedPitch flag (PDF 32000-1, table 123, bit 1).
_FIXED_PITCH = 1
#: Share of a line's letters set in a typewriter face for the line to count as code.
MONO_SHARE = 0.9
#: A font with no typewriter name or flag is one when at least this many of its glyphs are drawn
#: and all are as wide: a Type3 font (TeX's bitmap fonts, as Sweave's listings use) has no face
#: name to read. Fewer is no evidence: a proportional face's digits share one width too.
MONO_MIN_GLYPHS = 12


@dataclass(frozen=True)
class LineStyle:
    size: float  # the font size most of the line's letters are set in (points, rounded to 0.5)
    bold: bool


def _key(line: str) -> str:
    return " ".join(line.split())


def _effective_size(cm: Any, tm: Any, font_size: float) -> float:
    """The rendered size: the font size scaled by the text and transformation matrices' y axis."""
    try:
        scale = math.hypot(float(tm[2]), float(tm[3])) * math.hypot(float(cm[2]), float(cm[3]))
    except (TypeError, ValueError, IndexError):
        scale = 1.0
    return round(abs(float(font_size)) * scale * 2) / 2


def _is_bold(font: Any) -> bool:
    try:
        name = str(font.get("/BaseFont", "")) if font is not None else ""
    except Exception:
        name = ""
    return bool(_BOLD_FACE.search(name) or _TEX_BOLD_FACE.search(name))


def _is_mono(font: Any) -> bool:
    """Whether the font is a typewriter face (by its name or its descriptor's fixed-pitch flag)."""
    try:
        if font is None:
            return False
        if _MONO_FACE.search(str(font.get("/BaseFont", ""))):
            return True
        desc = font.get("/FontDescriptor")
        if desc is None and "/DescendantFonts" in font:
            desc = font["/DescendantFonts"][0].get_object().get("/FontDescriptor")
        flags = int(desc.get_object().get("/Flags", 0)) if desc is not None else 0
        return bool(flags & _FIXED_PITCH) or _uniform_widths(font)
    except Exception:
        return False  # a malformed font dictionary: read as proportional (prose), as before


def _uniform_widths(font: Any) -> bool:
    """Whether every glyph the font draws has one advance width (a fixed-pitch face, whatever it
    is called): at least `MONO_MIN_GLYPHS` glyphs with a width, all equal."""
    widths = font.get("/Widths")
    if widths is None:
        return False
    drawn = [float(w) for w in widths.get_object() if float(w) > 0]
    return len(drawn) >= MONO_MIN_GLYPHS and len({round(w, 2) for w in drawn}) == 1


#: A listing's line number, printed before the line in the text face ("18 \\begingroup").
_LINE_NUMBER = re.compile(r"^\s*(\d{1,5})\s+\S")


def _is_code(text: str, weights: Counter[tuple[float, bool]], mono_letters: int) -> bool:
    """A line set in a typewriter face, a line number before it aside: a short numbered line
    ("18 \\begingroup") would otherwise fall under `MONO_SHARE` for its two digits."""
    number = _LINE_NUMBER.match(text)
    letters = sum(weights.values()) - (len(number.group(1)) if number else 0)
    return letters > 0 and mono_letters >= MONO_SHARE * letters


class StyleCollector:
    """Fed by pypdf's `visitor_text`; yields each extracted line's style, keyed by its text."""

    def __init__(self) -> None:
        self._runs: list[tuple[str, float, bool, bool]] = []
        # A page's runs come in a handful of fonts: each is read once (its widths array is long).
        # The font is kept with its answer so that its id cannot be reused while the page is read.
        self._mono: dict[int, tuple[Any, bool]] = {}
        # The keys of the lines set in a typewriter face, and how many runs they were read from:
        # `monospaced` is asked line by line once the page is read, so they are read once.
        self._code_keys: tuple[int, frozenset[str]] = (-1, frozenset())

    def visit(self, text: str, cm: Any, tm: Any, font: Any, font_size: float) -> None:
        if text:
            size = _effective_size(cm, tm, font_size)
            known = self._mono.get(id(font))
            if known is None:
                known = self._mono[id(font)] = (font, _is_mono(font))
            self._runs.append((text, size, _is_bold(font), known[1]))

    def monospaced(self, line: str) -> bool:
        """Whether the page's text line (as read so far) is set in a typewriter face."""
        if self._code_keys[0] != len(self._runs):
            keys = frozenset(_key(t) for t, weights, mono, _ in self.lines() if _is_code(t, weights, mono))
            self._code_keys = (len(self._runs), keys)
        return _key(line) in self._code_keys[1]

    def lines(self) -> list[tuple[str, Counter[tuple[float, bool]], int, str]]:
        """Each line's text, how many of its letters were set in each (size, bold), how many in a
        typewriter face, and the bold text it opens on when text not in bold follows ("" when it
        opens on text not in bold, or is bold throughout)."""
        out: list[tuple[str, Counter[tuple[float, bool]], int, str]] = []
        text: list[str] = []
        weights: Counter[tuple[float, bool]] = Counter()
        mono_letters = 0
        lead: list[str] = []  # the bold text the line opens on, while no other letter came
        led = False  # a letter not in bold came after a bold opening
        opened = False  # the line's first printed character (a quote too) was not in bold
        for run, size, bold, mono in self._runs:
            parts = run.split("\n")
            for i, part in enumerate(parts):
                if i:
                    out.append(("".join(text), weights, mono_letters, "".join(lead) if led else ""))
                    text, weights, mono_letters, lead, led = [], Counter(), 0, [], False
                    opened = False
                opened = opened or (not bold and not lead and bool(part.strip()))
                text.append(part)
                n = sum(1 for c in part if c.isalnum())
                if n:
                    if bold and not led and not opened:
                        lead.append(part)
                    elif lead and not bold:
                        led = True
                    weights[(size, bold)] += n
                    mono_letters += n if mono else 0
        out.append(("".join(text), weights, mono_letters, "".join(lead) if led else ""))
        return out


class DocumentStyles:
    """Line styles across a document's pages and its body size."""

    def __init__(self) -> None:
        self._by_line: dict[str, LineStyle | None] = {}
        self._letters: Counter[float] = Counter()
        self._mono: dict[str, bool] = {}
        self._terms: dict[str, bool] = {}

    def add_page(self, collector: StyleCollector) -> None:
        for text, weights, mono_letters, lead in collector.lines():
            if not weights:
                continue
            # A line opening on a short bold term, the rest of it not in bold: a description list's
            # entry ("dgeMatrix Real matrices in general storage") or a run-in heading's paragraph.
            term = 0 < len(lead.split()) <= MAX_TERM_WORDS
            self._terms[_key(text)] = term and self._terms.get(_key(text), True)
            mono = _is_code(text, weights, mono_letters)
            # Text set both ways (a name in a listing and in prose) is not trusted as code.
            self._mono[_key(text)] = mono and self._mono.get(_key(text), True)
            for (size, _), n in weights.items():
                self._letters[size] += n
            (size, _), _ = weights.most_common(1)[0]
            total = sum(weights.values())
            bold_share = sum(n for (_, b), n in weights.items() if b) / total
            style = LineStyle(size=size, bold=bold_share >= BOLD_SHARE)
            key = _key(text)
            # The same text set two ways (a heading repeated in body text) is not trusted as either.
            if key in self._by_line and self._by_line[key] != style:
                self._by_line[key] = None
            else:
                self._by_line[key] = style

    @property
    def body_size(self) -> float:
        return self._letters.most_common(1)[0][0] if self._letters else 0.0

    def monospaced(self, line: str) -> bool:
        """Whether the line is set in a typewriter face: a line of a code listing."""
        return self._mono.get(_key(line), False)

    def opens_on_term(self, line: str) -> bool:
        """Whether the line opens on a short bold term and goes on in another weight."""
        return self._terms.get(_key(line), False)

    def style(self, line: str) -> LineStyle | None:
        return self._by_line.get(_key(line))

    def set_small(self, line: str) -> bool:
        """Whether the line is set smaller than the body by as much as a heading is set larger
        (`SIZE_RATIO`): a footnote, a table's cell, a figure's label. No heading is."""
        style = self.style(line)
        body = self.body_size
        return style is not None and body > 0 and style.size * SIZE_RATIO <= body

    def heading_style(self, line: str) -> LineStyle | None:
        """The line's style when its typography sets it apart as a heading."""
        style = self.style(line)
        body = self.body_size
        if style is None or body <= 0:
            return None
        if style.size >= body * SIZE_RATIO or (style.bold and style.size >= body):
            return style
        return None


#: A line opening on a section number and a capitalised word ("1 Introduction", "2.1 Scope")
#: starts a heading of its own: it never continues the heading line above it ("Contents").
_SECTION_NUMBER = re.compile(r"^\s*\d{1,3}(?:\.\d{1,3})*\.?\s+[A-Z]")
_TITLE_LIKE = re.compile(r"^[\w(\"'\u201c\u2018][^|]*$")
#: A title does not end on a word that needs a continuation; a wrapped line of bold prose does.
_OPEN_END = re.compile(
    r"\b(?:of|and|or|the|a|an|to|with|for|in|on|by|at|from|that|as|is|are)$", re.IGNORECASE
)


#: A title trailing off ("4 Interactions of two factors,....."): the dots close no sentence.
_TRAILING_ELLIPSIS = re.compile(r"[\s,;:]*(?:\.{3,}|\u2026)$")
#: A contents entry's tail: a leader of dots (maybe spaced) or ellipsis characters, then a page
#: number ("1.1. Why a revision? ........ 5", "Survey results…………… 14"). A contents page set
#: in the headings' bold or size must not make each entry a section: the entry is text (its span
#: is kept whole by `spans`), the heading is the one it points to.
_CONTENTS_TAIL = re.compile(rf"(?:{leader_dots(4)}|(?<!\u2026)\u2026{{2,}}+)[ \t.\u2026]*+\d{{1,4}}$")


def reads_like_heading(text: str) -> bool:
    """Short, starts with a letter or digit, not a sentence (no closing full stop or comma), not a
    contents entry (a leader and a page number)."""
    if _CONTENTS_TAIL.search(text.strip()):
        return False
    s = _TRAILING_ELLIPSIS.sub("", text.strip())
    if not (2 <= len(s) <= MAX_HEADING_CHARS) or len(s.split()) > MAX_HEADING_WORDS:
        return False
    if s[-1] in ".,;:" and not re.search(r"\d\.$", s):
        return False
    if s[0].islower() or _OPEN_END.search(s):
        return False  # the middle of a sentence set in bold
    return bool(_TITLE_LIKE.match(s)) and sum(c.isalpha() for c in s) >= 2


def styled_headings(
    lines: list[str],
    styles: DocumentStyles,
    is_excluded: Callable[[int], bool],
    ends_group: Callable[[int], bool] | None = None,
) -> dict[int, tuple[int, str, LineStyle]]:
    """Line index → (number of lines, heading text, style) for each typographic heading.

    Consecutive heading-styled lines of one style form a group: a group of at most
    `MAX_HEADING_LINES` lines is one heading (a title wrapped over two lines), a longer one is
    emphasised prose and gives none; a numbered line ("1 Introduction") starts a group. A line
    for which `ends_group` holds (a caption) is never part of a group: the group before it ends
    there, and it and the lines of its style after it (the
    caption wrapped) give no heading."""
    out: dict[int, tuple[int, str, LineStyle]] = {}
    i = 0
    while i < len(lines):
        style = styles.heading_style(lines[i]) if lines[i].strip() else None
        if style is not None and ends_group and ends_group(i):
            # A caption wrapped over lines of its style: its continuation is no heading either.
            i += 1
            while i < len(lines) and lines[i].strip() and styles.heading_style(lines[i]) == style:
                i += 1
            continue
        if style is None or is_excluded(i):
            i += 1
            continue
        j = i + 1
        while (
            j < len(lines)
            and lines[j].strip()
            and styles.heading_style(lines[j]) == style
            and not (ends_group and ends_group(j))
            and not _SECTION_NUMBER.match(lines[j])
        ):
            j += 1
        name = " ".join(lines[k].strip() for k in range(i, j))
        if j - i <= MAX_HEADING_LINES and reads_like_heading(name):
            out[i] = (j - i, name, style)
        i = j
    return out


def heading_levels(styles: Iterable[LineStyle]) -> dict[LineStyle, int]:
    """Level of each heading style: larger sizes first, bold before regular at one size. A style
    used once (a cover title, a masthead) is level 1 and takes no rank from the recurring ones."""
    counts = Counter(styles)
    order = sorted((s for s, n in counts.items() if n > 1), key=lambda s: (-s.size, not s.bold))
    levels = {s: min(i + 1, 4) for i, s in enumerate(order)}
    return {s: levels.get(s, 1) for s in counts}


_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
#: A line ending in a word fragment and a hyphen, the next line starting with a lower-case letter.
_SPLIT = re.compile(r"([^\W\d_]+)-\n([a-z][^\W\d_]*)([ \t]*)")


def vocabulary(texts: Iterable[str]) -> Counter[str]:
    """Words (hyphenated compounds as one word and as their parts), case-folded, with counts."""
    words: Counter[str] = Counter()
    for text in texts:
        for m in _WORD.finditer(text):
            w = m.group(0).lower()
            words[w] += 1
            if "-" in w:
                words.update(w.split("-"))
    return words


def dehyphenate(text: str, words: Counter[str]) -> str:
    """Join a word split at a line end, keeping the line count (the rest of the line stays put).

    "recom-\\nmendation of" → "recommendation\\nof" when the document supports the join:
    the joined word occurs elsewhere more often than the hyphenated form; or neither occurs and
    neither part is a word of its own ("recom", "mendation"). A real compound ("long-\\nterm",
    where "long-term" occurs elsewhere, or "web-\\nbased" where "based" is a word) keeps its
    hyphen: "long-term\\nuse".
    Only a lower-case continuation is joined: "COVID-\\n19" and "Part A-\\nB" stay as they are."""

    def join(m: re.Match[str]) -> str:
        left, right = m.group(1), m.group(2)
        joined, hyphened = (left + right).lower(), f"{left}-{right}".lower()
        # The split itself counted as the two words "left" and "right", never as either form.
        n_joined, n_hyphened = words[joined], words[hyphened]
        # Each part counted once for the split itself: more is a use of its own elsewhere.
        parts_are_words = words[left.lower()] > 1 or words[right.lower()] > 1
        if n_joined > n_hyphened or not (n_hyphened or parts_are_words):
            word = f"{left}{right}"
        else:
            word = f"{left}-{right}"
        after = m.string[m.end() : m.end() + 1]
        return word if after in ("", "\n") else word + "\n"

    return _SPLIT.sub(join, text)
