"""The one catalogue of what peer-authored text loses before another agent reads it.

Everything the fence strips is listed here, each entry with the reason and the source it was
taken from, so a reviewer can answer "why is this character / token gone?" in one file and a
maintainer can add a model family by appending one line. ``rooms.untrusted`` applies the
catalogue; ``docs/untrusted.md`` explains it for people.

Two kinds of entry:

* **Code points** (:data:`CODE_POINT_RANGES`, plus every ``Cf``/``Cc``/``Cs`` code point and
  every noncharacter): invisible or control characters that can hide text from a human
  reviewer while a model still reads it, reorder what a human sees (Trojan Source), or break
  encoders. They are deleted.
* **Chat-template control tokens** (:data:`CHAT_TEMPLATE_TOKENS`, :data:`GENERIC_TOKEN_PATTERNS`,
  :data:`LINE_MARKER_WORDS`) and **fence markers** (:data:`FENCE_MARKER_PATTERNS`): strings a
  model was trained to read as "a new turn / a new role / the end of the data". They are
  deleted wherever they occur.

Normalisation, exactly:

* Input is NFKC-normalised before anything else and the *output* stays NFKC. NFKC rather than
  NFC because some tokenizers apply NFKC themselves (SentencePiece ``nmt_nfkc`` normalisers),
  so an NFC output could still carry a fullwidth ``<|im_start|>`` (U+FF1C U+FF5C …) that becomes
  the real token one step
  downstream. Delivering exactly the form we checked removes that gap. The cost is cosmetic:
  compatibility characters are rewritten (fullwidth Latin to ASCII, ``ﬁ`` to ``fi``, ``²`` to
  ``2``, ``…`` to ``...``, ``™`` to ``TM``).
* Tokens are *detected* on a folded view of the NFKC text: full Unicode case folding
  (``str.casefold``) plus a small 1:1 map of lookalikes (:data:`CONFUSABLES`: Cyrillic and
  Greek letters that look Latin, bar and angle-bracket lookalikes). Matches are mapped back to
  the NFKC text and deleted there, so the output is not case-folded.
* Token patterns tolerate whitespace around their punctuation (``< | im_start | >``) and
  ``_``, ``-``, space or ``▁`` for the underscore inside a token name.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import AnyStr


class StripCategory(enum.StrEnum):
    """Stable names for what was stripped; they appear in ledger events, never the content."""

    TAG_CHARACTER = "tag_character"
    BIDI_CONTROL = "bidi_control"
    ZERO_WIDTH = "zero_width"
    VARIATION_SELECTOR = "variation_selector"
    FORMAT_CHARACTER = "format_character"
    CONTROL_CHARACTER = "control_character"
    SURROGATE = "surrogate"
    NONCHARACTER = "noncharacter"
    CHAT_TEMPLATE_TOKEN = "chat_template_token"  # noqa: S105 (a name, not a secret)
    FENCE_MARKER = "fence_marker"
    # A line-start role marker ("User:", "### System:", "**Developer:**"), a bracketed role
    # ("[system]") or an instruction pseudo-tag ("<instructions>", "<IMPORTANT>").
    ROLE_MARKER = "role_marker"
    # The same, naming an authority ("System:", "[admin]", "<IMPORTANT>"): also a fake notice.
    AUTHORITY_MARKER = "authority_marker"
    # A whole ANSI / ISO 6429 escape sequence (CSI "ESC [ … m", OSC "ESC ] … BEL"): the ESC
    # alone is a control character, but the visible rest ("[31m") would survive it.
    ESCAPE_SEQUENCE = "escape_sequence"
    # An HTML entity or percent-encoding of token punctuation ("&lt;", "%3C"), decoded so that
    # an encoded boundary or token cannot survive verbatim (the decoded form is then matched).
    ENCODED_PUNCTUATION = "encoded_punctuation"
    # Last resort when nesting defeats the fixpoint loop (see ``rooms.untrusted``).
    TOKEN_PUNCTUATION = "token_punctuation"  # noqa: S105 (a name, not a secret)


_HIDDEN = "hidden or invisible characters"
# What each category is, as a person reads it (an owner told why their text was refused).
STRIP_CATEGORY_WORDS: dict[StripCategory, str] = {
    StripCategory.TAG_CHARACTER: _HIDDEN,
    StripCategory.BIDI_CONTROL: "characters that reverse the text's direction",
    StripCategory.ZERO_WIDTH: _HIDDEN,
    StripCategory.VARIATION_SELECTOR: _HIDDEN,
    StripCategory.FORMAT_CHARACTER: _HIDDEN,
    StripCategory.CONTROL_CHARACTER: "control characters",
    StripCategory.SURROGATE: "broken characters",
    StripCategory.NONCHARACTER: "broken characters",
    StripCategory.CHAT_TEMPLATE_TOKEN: "a language model's control token (such as <|im_start|>)",
    StripCategory.FENCE_MARKER: "a line that imitates Synapsia's untrusted-text markers",
    StripCategory.ROLE_MARKER: 'a speaker label at the start of a line (such as "User:")',
    StripCategory.AUTHORITY_MARKER: 'a label claiming authority (such as "System:" or "[admin]")',
    StripCategory.ESCAPE_SEQUENCE: "terminal escape codes",
    StripCategory.ENCODED_PUNCTUATION: "encoded angle brackets or similar (such as &lt;)",
    StripCategory.TOKEN_PUNCTUATION: "deeply nested control tokens",
}


# --------------------------------------------------------------------------------------------
# Code points
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CodePointRange:
    """An inclusive range of code points that is always deleted, with why and from where."""

    first: int
    last: int
    category: StripCategory
    why: str


# Order is precedence: a code point takes the category of the first range containing it.
CODE_POINT_RANGES: tuple[CodePointRange, ...] = (
    # Unicode "Tags" block. Invisible ASCII look-alikes (E0020-E007E mirror U+0020-U+007E);
    # models decode them, humans never see them ("ASCII smuggling", Rehberger 2024).
    # Source: Unicode Standard ch. 23.9 "Tag Characters"; UTS #51 §2.7 (emoji tag sequences).
    CodePointRange(0xE0000, 0xE007F, StripCategory.TAG_CHARACTER, "tag characters"),
    # Bidirectional embeddings/overrides/isolates reorder what a human sees versus what a
    # model reads ("Trojan Source", CVE-2021-42574). Source: UAX #9 §2.1-2.6.
    CodePointRange(0x202A, 0x202E, StripCategory.BIDI_CONTROL, "LRE, RLE, PDF, LRO, RLO"),
    CodePointRange(0x2066, 0x2069, StripCategory.BIDI_CONTROL, "LRI, RLI, FSI, PDI"),
    # Implicit directional marks: harmless to meaning, so no loss, and invisible.
    CodePointRange(0x200E, 0x200F, StripCategory.BIDI_CONTROL, "LRM, RLM"),
    CodePointRange(0x061C, 0x061C, StripCategory.BIDI_CONTROL, "ARABIC LETTER MARK"),
    # Zero-width characters: the classic hidden-text channel (binary-encoded in ZWSP/ZWNJ/ZWJ).
    # ZWJ/ZWNJ also shape emoji and Indic/Persian text; losing them splits 👨‍👩‍👧 into its
    # parts and drops a shaping hint, never a letter. Source: Unicode ch. 23.2 "Layout Controls".
    CodePointRange(0x200B, 0x200D, StripCategory.ZERO_WIDTH, "ZWSP, ZWNJ, ZWJ"),
    CodePointRange(0x2060, 0x2064, StripCategory.ZERO_WIDTH, "word joiner, invisible operators"),
    CodePointRange(0xFEFF, 0xFEFF, StripCategory.ZERO_WIDTH, "BOM / ZWNBSP"),
    CodePointRange(0x180E, 0x180E, StripCategory.ZERO_WIDTH, "MONGOLIAN VOWEL SEPARATOR"),
    # Variation selectors. VS17-VS256 (and VS1-VS14 in runs) carry a byte each after a visible
    # base: "emoji smuggling" (Butler 2025) hides arbitrary bytes behind one emoji. Legitimate
    # uses are ideographic variants and math/CJK standardized variants: a glyph preference,
    # never meaning. VS15/VS16 (FE0E/FE0F, text/emoji presentation) are kept when they follow
    # an emoji-capable base, see STRAY_PRESENTATION_SELECTOR. Source: Unicode ch. 23.4;
    # StandardizedVariants.txt; emoji-variation-sequences.txt.
    CodePointRange(0xFE00, 0xFE0D, StripCategory.VARIATION_SELECTOR, "VS1-VS14"),
    CodePointRange(0xE0100, 0xE01EF, StripCategory.VARIATION_SELECTOR, "VS17-VS256"),
    # The rest of Default_Ignorable_Code_Point (DerivedCoreProperties.txt): code points a
    # renderer shows as nothing, including the reserved ones so that a later Unicode version
    # assigning them cannot open a new invisible channel.
    CodePointRange(0x00AD, 0x00AD, StripCategory.FORMAT_CHARACTER, "SOFT HYPHEN"),
    CodePointRange(0x034F, 0x034F, StripCategory.FORMAT_CHARACTER, "COMBINING GRAPHEME JOINER"),
    CodePointRange(0x115F, 0x1160, StripCategory.FORMAT_CHARACTER, "Hangul fillers"),
    CodePointRange(0x17B4, 0x17B5, StripCategory.FORMAT_CHARACTER, "Khmer inherent vowels"),
    CodePointRange(0x180B, 0x180D, StripCategory.FORMAT_CHARACTER, "Mongolian FVS1-3"),
    CodePointRange(0x180F, 0x180F, StripCategory.FORMAT_CHARACTER, "Mongolian FVS4"),
    CodePointRange(0x2065, 0x2065, StripCategory.FORMAT_CHARACTER, "reserved ignorable"),
    CodePointRange(0x206A, 0x206F, StripCategory.FORMAT_CHARACTER, "deprecated format chars"),
    CodePointRange(0x3164, 0x3164, StripCategory.FORMAT_CHARACTER, "HANGUL FILLER"),
    CodePointRange(0xFFA0, 0xFFA0, StripCategory.FORMAT_CHARACTER, "HALFWIDTH HANGUL FILLER"),
    CodePointRange(0xFFF0, 0xFFF8, StripCategory.FORMAT_CHARACTER, "reserved ignorable"),
    CodePointRange(0xFFF9, 0xFFFB, StripCategory.FORMAT_CHARACTER, "interlinear annotation"),
    CodePointRange(0x1BCA0, 0x1BCA3, StripCategory.FORMAT_CHARACTER, "shorthand format"),
    CodePointRange(0x1D173, 0x1D17A, StripCategory.FORMAT_CHARACTER, "musical format"),
    CodePointRange(0xE0080, 0xE00FF, StripCategory.FORMAT_CHARACTER, "reserved ignorable"),
    CodePointRange(0xE01F0, 0xE0FFF, StripCategory.FORMAT_CHARACTER, "reserved ignorable"),
    # Format characters of Unicode 16 not covered above (kept explicit so an older Python
    # Unicode database still strips them): Arabic/Syriac/Kaithi prepended concatenation marks
    # and Egyptian hieroglyph format controls. Every other Cf the running Python knows is
    # added by _build_code_point_table().
    CodePointRange(0x0600, 0x0605, StripCategory.FORMAT_CHARACTER, "Arabic number signs"),
    CodePointRange(0x06DD, 0x06DD, StripCategory.FORMAT_CHARACTER, "ARABIC END OF AYAH"),
    CodePointRange(0x070F, 0x070F, StripCategory.FORMAT_CHARACTER, "SYRIAC ABBREVIATION MARK"),
    CodePointRange(0x0890, 0x0891, StripCategory.FORMAT_CHARACTER, "Arabic pound/piastre mark"),
    CodePointRange(0x08E2, 0x08E2, StripCategory.FORMAT_CHARACTER, "ARABIC DISPUTED END OF AYAH"),
    CodePointRange(0x110BD, 0x110BD, StripCategory.FORMAT_CHARACTER, "KAITHI NUMBER SIGN"),
    CodePointRange(0x110CD, 0x110CD, StripCategory.FORMAT_CHARACTER, "KAITHI NUMBER SIGN ABOVE"),
    CodePointRange(0x13430, 0x1343F, StripCategory.FORMAT_CHARACTER, "hieroglyph format"),
    # C0 controls except TAB and LF, DEL, C1 controls: terminal escapes, NUL truncation in C
    # libraries, and invisible in most renderers. CR is not listed: ``rooms.untrusted`` turns
    # CR, CRLF, NEL, LS and PS into LF first so line structure survives. Source: ISO 6429.
    CodePointRange(0x0000, 0x0008, StripCategory.CONTROL_CHARACTER, "C0 controls"),
    CodePointRange(0x000B, 0x001F, StripCategory.CONTROL_CHARACTER, "C0 controls"),
    CodePointRange(0x007F, 0x009F, StripCategory.CONTROL_CHARACTER, "DEL and C1 controls"),
    # Lone surrogates are legal in a Python str (JSON "\ud800" decodes to one) but cannot be
    # encoded as UTF-8, so they would crash the byte cap and every encoder after it.
    CodePointRange(0xD800, 0xDFFF, StripCategory.SURROGATE, "surrogates"),
    # Noncharacters are "permanently reserved for internal use" (Unicode ch. 23.7, Corrigendum
    # #9): never meaningful in interchange. The planes' FFFE/FFFF pairs are added below.
    CodePointRange(0xFDD0, 0xFDEF, StripCategory.NONCHARACTER, "noncharacters"),
)

# VS15/VS16 decide text-vs-emoji presentation (☎︎ / ☎️) and are in nearly every emoji text, so
# stripping them would be noisy. One is kept when it directly follows a base that can take it;
# a selector anywhere else (after a letter, another selector, at the start) is stripped, which
# closes the run-based smuggling channel and leaves at most one bit per visible base character.
# The base set approximates emoji-variation-sequences.txt (ranges, not an exact list).
EMOJI_BASE_CLASS = (
    "#*0-9\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2"
    "\u25aa-\u27bf\u2934\u2935\u2b05-\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
PRESENTATION_SELECTORS = "\ufe0e\ufe0f"
# (Selector first, lookbehind second: re then jumps between selectors.)
STRAY_PRESENTATION_SELECTOR = re.compile(
    f"[{PRESENTATION_SELECTORS}](?<![{EMOJI_BASE_CLASS}][{PRESENTATION_SELECTORS}])"
)


def _build_code_point_table() -> dict[int, StripCategory]:
    """Code point -> category for every always-stripped code point (not VS15/VS16)."""
    table: dict[int, StripCategory] = {}
    for entry in CODE_POINT_RANGES:
        for cp in range(entry.first, entry.last + 1):
            table.setdefault(cp, entry.category)
    for plane in range(17):  # U+nFFFE and U+nFFFF in every plane are noncharacters
        for low in (0xFFFE, 0xFFFF):
            table.setdefault(plane * 0x10000 + low, StripCategory.NONCHARACTER)
    # Any other Cf / Cc the running Unicode database knows about (only planes 0, 1 and 14 hold
    # them). This keeps "every format character goes" true after a Python upgrade.
    for cp in chain(range(0x20000), range(0xE0000, 0xE1000)):
        if cp in table or cp in (0x09, 0x0A, 0x0D):
            continue
        general = unicodedata.category(chr(cp))
        if general == "Cf":
            table[cp] = StripCategory.FORMAT_CHARACTER
        elif general == "Cc":
            table[cp] = StripCategory.CONTROL_CHARACTER
    # CR is normalised to LF before stripping; listing it anyway makes a stray CR impossible.
    table.setdefault(0x0D, StripCategory.CONTROL_CHARACTER)
    return table


_CODE_POINT_TABLE = _build_code_point_table()

STRIPPED_CODE_POINTS: frozenset[int] = frozenset(_CODE_POINT_TABLE)
"""Every code point that never survives fencing (VS15/VS16 survive only after an emoji base)."""


def category_of(char: str) -> StripCategory | None:
    """The strip category of one character, or ``None`` when it is kept."""
    return _CODE_POINT_TABLE.get(ord(char))


def char_class(code_points: Iterable[int]) -> str:
    """A regex character class body covering ``code_points``, compressed into ranges."""
    ordered = sorted(code_points)
    parts: list[str] = []
    start = prev = ordered[0]
    for cp in [*ordered[1:], -1]:
        if cp == prev + 1:
            prev = cp
            continue
        first, last = re.escape(chr(start)), re.escape(chr(prev))
        parts.append(first if start == prev else f"{first}-{last}")
        start = prev = cp
    return "".join(parts)


# Speed: Python's re turns a class of BMP code points into a bitmap, but scans astral ranges
# one by one for every character. So the BMP and astral parts are separate patterns, the astral
# one runs only when the text has astral characters at all, and ASCII text (``str.isascii`` is
# O(1)) only needs the C0 check.
_ASCII_STRIPPABLE = re.compile(f"[{char_class(cp for cp in _CODE_POINT_TABLE if cp < 0x80)}]+")
_BMP_STRIPPABLE = re.compile(f"[{char_class(cp for cp in _CODE_POINT_TABLE if cp < 0x10000)}]+")
_ASTRAL_STRIPPABLE = re.compile(f"[{char_class(cp for cp in _CODE_POINT_TABLE if cp >= 0x10000)}]+")
ASTRAL_RUNS = re.compile("[\U00010000-\U0010ffff]+")


def _without_astral_strippable(run: re.Match[str]) -> str:
    return _ASTRAL_STRIPPABLE.sub("", run[0])


# One scan finds every BMP code point the catalogue strips and every astral character (the
# astral range is one range check, not one per catalogued astral range): the few characters
# it returns are all the astral and BMP classes below ever need to look at. With a group,
# ``split`` returns what lies between those runs and the runs themselves in the same scan.
_BMP_STRIPPABLE_OR_ASTRAL_SPLIT = re.compile(
    f"([{char_class(cp for cp in _CODE_POINT_TABLE if cp < 0x10000)}\U00010000-\U0010ffff]+)"
)
_STRIPPABLE = re.compile(f"[{char_class(_CODE_POINT_TABLE)}]+")


# The bytes of UTF-8 that are not a catalogued ASCII code point: every byte of a multi-byte
# sequence is >= 0x80, so deleting these from a text's UTF-8 leaves its catalogued ASCII.
_NOT_CATALOGUED_ASCII_BYTES = bytes(
    b for b in range(256) if not (b < 0x80 and b in _CODE_POINT_TABLE)
)
# Below this many characters a line on average, the whole text is scanned instead.
_MIN_LINE = 32


def strip_code_points(text: str) -> tuple[str, Counter[StripCategory]]:
    """Delete every catalogued code point; return the text and per-category counts.

    Where that is cheaper, only the lines outside ASCII are scanned (joined by newlines, in one
    scan), not the whole text, where the class scan cost every character (~16 ns each: most of
    an 8 KB cleaning's cost, for the few injection lines that hold anything to strip). Exact:
    a catalogued code point is never a newline, so no run of them spans one, the scan deletes
    or adds no newline, and deleting them from each line deletes them from the text. A line of
    ASCII (``str.isascii`` is O(1) on a string ``split`` made) can hold catalogued ASCII code
    points only; so this is taken only when the text holds none (its UTF-8 less every other
    byte is empty), and when its lines are long enough on average (``_MIN_LINE``) that looking
    at each costs less than the scan would."""
    if (
        text.isascii()
        or not few_long_lines(text)
        or text.encode("utf-8", "surrogatepass").translate(None, _NOT_CATALOGUED_ASCII_BYTES)
    ):
        text, counts = _strip_code_points_scan(text)
        return strip_stray_presentation_selectors(text, counts)
    lines, outside = lines_outside_ascii(text)
    scanned = "\n".join([lines[index] for index in outside])
    kept, counts = _strip_code_points_scan(scanned)
    if kept != scanned:
        for index, line in zip(outside, kept.split("\n"), strict=True):
            lines[index] = line
        text = "\n".join(lines)
    return strip_stray_presentation_selectors(text, counts)


def lines_outside_ascii(text: str) -> tuple[list[str], list[int]]:
    """``text`` split at its newlines, and the indexes of the lines holding a character
    outside ASCII, in order (``str.isascii`` is O(1) on each line ``split`` made)."""
    lines = text.split("\n")
    return lines, [index for index, line in enumerate(lines) if not line.isascii()]


def few_long_lines(text: str) -> bool:
    """Whether ``text``'s lines are on average at least ``_MIN_LINE`` characters long, so
    that looking at each line (:func:`lines_outside_ascii`) costs less than a class scan of
    every character."""
    return text.count("\n") * _MIN_LINE <= len(text)


def _strip_code_points_scan(text: str) -> tuple[str, Counter[StripCategory]]:
    """:func:`strip_code_points` less its presentation-selector step, by class scans."""
    counts: Counter[StripCategory] = Counter()
    if text.isascii():
        runs = _ASCII_STRIPPABLE.findall(text)
        if runs:
            counts.update(_CODE_POINT_TABLE[ord(char)] for char in "".join(runs))
            text = _ASCII_STRIPPABLE.sub("", text)
        return text, counts
    # The whole text meets one class, once: the candidates (BMP strippable or astral) in text
    # order. The catalogue's classes then look at the candidates only: the astral class is
    # slow in re (a range check per range for every character it looks at).
    parts = _BMP_STRIPPABLE_OR_ASTRAL_SPLIT.split(text)
    if len(parts) > 1:
        runs = parts[1::2]
        candidates = "".join(runs)
        bmp = _BMP_STRIPPABLE.findall(candidates)
        astral = "".join(ASTRAL_RUNS.findall(candidates))
        astral_runs = _ASTRAL_STRIPPABLE.findall(astral) if astral else []
        if bmp:
            counts.update(_CODE_POINT_TABLE[ord(char)] for char in "".join(bmp))
        if astral_runs:
            counts.update(_CODE_POINT_TABLE[ord(char)] for char in "".join(astral_runs))
            # Kept astral characters sit in the runs too: each run loses its catalogued ones.
            parts[1::2] = [_STRIPPABLE.sub("", run) for run in runs]
            text = "".join(parts)
        elif bmp:
            text = _BMP_STRIPPABLE.sub("", text)
    return text, counts


def strip_stray_presentation_selectors(
    text: str, counts: Counter[StripCategory]
) -> tuple[str, Counter[StripCategory]]:
    """Delete every VS15/VS16 that does not follow an emoji base; ``counts`` gains them.

    The only part of :func:`strip_code_points` that can act on text it has already cleaned
    once, after deletions elsewhere (a removed "User:*" leaves the selector that followed
    its "*" after something else): see ``rooms.untrusted._sanitise``."""
    if "\ufe0e" in text or "\ufe0f" in text:  # the lookbehind is costly; run it only if needed
        text, stray = STRAY_PRESENTATION_SELECTOR.subn("", text)
        if stray:
            counts[StripCategory.VARIATION_SELECTOR] += stray
    return text, counts


# --------------------------------------------------------------------------------------------
# Detection view: case folding plus lookalikes
# --------------------------------------------------------------------------------------------

# 1:1 lookalike map applied after casefold for *detection only* (positions stay aligned).
# A hand-picked subset of UTS #39 confusables.txt: letters that render like Latin in common
# fonts, and lookalikes of the punctuation that control tokens are made of. Not exhaustive.
CONFUSABLES: dict[str, str] = {
    # Cyrillic (after casefold)
    "\u0430": "a",  # CYRILLIC SMALL LETTER A
    "\u0432": "b",  # CYRILLIC SMALL LETTER VE
    "\u0435": "e",  # CYRILLIC SMALL LETTER IE
    "\u0437": "3",  # CYRILLIC SMALL LETTER ZE
    "\u0456": "i",  # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I
    "\u0458": "j",  # CYRILLIC SMALL LETTER JE
    "\u043a": "k",  # CYRILLIC SMALL LETTER KA
    "\u043c": "m",  # CYRILLIC SMALL LETTER EM
    "\u043d": "h",  # CYRILLIC SMALL LETTER EN
    "\u043e": "o",  # CYRILLIC SMALL LETTER O
    "\u0440": "p",  # CYRILLIC SMALL LETTER ER
    "\u0441": "c",  # CYRILLIC SMALL LETTER ES
    "\u0442": "t",  # CYRILLIC SMALL LETTER TE
    "\u0443": "y",  # CYRILLIC SMALL LETTER U
    "\u0445": "x",  # CYRILLIC SMALL LETTER HA
    "\u0455": "s",  # CYRILLIC SMALL LETTER DZE
    "\u04bb": "h",  # CYRILLIC SMALL LETTER SHHA
    "\u0501": "d",  # CYRILLIC SMALL LETTER KOMI DE
    "\u051b": "q",  # CYRILLIC SMALL LETTER QA
    "\u051d": "w",  # CYRILLIC SMALL LETTER WE
    "\u04cf": "l",  # CYRILLIC SMALL LETTER PALOCHKA
    # Greek
    "\u03b1": "a",  # GREEK SMALL LETTER ALPHA
    "\u03b9": "i",  # GREEK SMALL LETTER IOTA
    "\u03ba": "k",  # GREEK SMALL LETTER KAPPA
    "\u03bd": "v",  # GREEK SMALL LETTER NU
    "\u03bf": "o",  # GREEK SMALL LETTER OMICRON
    "\u03c1": "p",  # GREEK SMALL LETTER RHO
    "\u03c4": "t",  # GREEK SMALL LETTER TAU
    "\u03c5": "u",  # GREEK SMALL LETTER UPSILON
    "\u03c7": "x",  # GREEK SMALL LETTER CHI
    "\u03f2": "c",  # GREEK LUNATE SIGMA SYMBOL
    "\u03f3": "j",  # GREEK LETTER YOT
    # Latin oddities
    "\u0131": "i",  # LATIN SMALL LETTER DOTLESS I
    "\u0237": "j",  # LATIN SMALL LETTER DOTLESS J
    "\u0261": "g",  # LATIN SMALL LETTER SCRIPT G
    "\u0251": "a",  # LATIN SMALL LETTER ALPHA
    # Armenian
    "\u0585": "o",  # ARMENIAN SMALL LETTER OH
    "\u057d": "u",  # ARMENIAN SMALL LETTER SEH
    "\u0570": "h",  # ARMENIAN SMALL LETTER HO
    "\u0578": "n",  # ARMENIAN SMALL LETTER VO
    # Bars and angle brackets that survive NFKC
    "\u00a6": "|",  # BROKEN BAR
    "\u01c0": "|",  # LATIN LETTER DENTAL CLICK
    "\u2223": "|",  # DIVIDES
    "\u2502": "|",  # BOX DRAWINGS LIGHT VERTICAL
    "\u2758": "|",  # LIGHT VERTICAL BAR
    "\u2039": "<",  # SINGLE LEFT-POINTING ANGLE QUOTATION MARK
    "\u203a": ">",  # SINGLE RIGHT-POINTING ANGLE QUOTATION MARK
    "\u3008": "<",  # LEFT ANGLE BRACKET
    "\u3009": ">",  # RIGHT ANGLE BRACKET
    "\u276e": "<",  # HEAVY LEFT-POINTING ANGLE QUOTATION MARK ORNAMENT
    "\u276f": ">",  # HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT
    "\u02c2": "<",  # MODIFIER LETTER LEFT ARROWHEAD
    "\u02c3": ">",  # MODIFIER LETTER RIGHT ARROWHEAD
}

# Code points whose casefold is longer than one character (sharp s -> ss, ligatures, ...): the only
# places where the folded view and the text drift apart.
_EXPANDING_CODE_POINTS = tuple(cp for cp in range(0x20000) if len(chr(cp).casefold()) > 1)
_EXPANDING_CASEFOLD = re.compile(f"[{char_class(_EXPANDING_CODE_POINTS)}]")
# The same characters as a set (all outside ASCII), for _expanding_positions.
_EXPANDING_SET = frozenset(map(chr, _EXPANDING_CODE_POINTS))


_CONFUSABLE_RUNS = re.compile(f"[{char_class(map(ord, CONFUSABLES))}]+")
_CONFUSABLE_SET = frozenset(CONFUSABLES)
_ASCII_BYTES = bytes(range(0x80))


def non_ascii_characters(text: str) -> str:
    """The characters of ``text`` outside ASCII, in order (adjacency is lost where ASCII stood
    between them). C-speed whatever the text: UTF-8 encoding, then deleting every ASCII byte
    (never part of a multi-byte sequence, so what is left is the UTF-8 of exactly those
    characters). About 1 ns a character, where a regex class costs 7-8 ns at every position;
    so "which non-ASCII characters does this text hold" costs a few microseconds on 8 KB."""
    return (
        text.encode("utf-8", "surrogatepass")
        .translate(None, _ASCII_BYTES)
        .decode("utf-8", "surrogatepass")
    )


def replace_confusables(text: str, *, alphanumeric_only: bool = False) -> str:
    """Map the lookalikes in ``text`` to their Latin twins (1:1, so indexes stay valid).

    ``str.translate`` costs ~150 ns per non-ASCII character; one ``str.replace`` per distinct
    lookalike actually present is C-speed, and usually there are none or a few. Which are
    present is read off the text's non-ASCII characters (every lookalike is outside ASCII),
    not found by a class scan of the whole text. The order of the replacements does not
    matter: every target is ASCII, so none is itself a lookalike.
    """
    if text.isascii():
        return text
    for char in _CONFUSABLE_SET.intersection(non_ascii_characters(text)):
        target = CONFUSABLES[char]
        if target.isalnum() or not alphanumeric_only:
            text = text.replace(char, target)
    return text


def occurrences(text: AnyStr, needles: Iterable[AnyStr]) -> list[int]:
    """Every position where one of ``needles`` starts in ``text`` (overlaps included), in
    order and each once, by ``find`` (C-speed, where a regex tries every position)."""
    positions: set[int] = set()
    for needle in needles:
        found = text.find(needle)
        while found >= 0:
            positions.add(found)
            found = text.find(needle, found + 1)
    return sorted(positions)


def _expanding_positions(text: str) -> list[int]:
    """The starts of ``_EXPANDING_CASEFOLD.finditer(text)`` (one character each), in order:
    the distinct expanding characters present are read off the text's non-ASCII characters,
    and each is found by ``str.find``, where the class scanned every position."""
    return occurrences(text, _EXPANDING_SET.intersection(non_ascii_characters(text)))


def fold(text: str) -> str:
    """The detection view of NFKC text: casefold, then lookalikes to their Latin twin."""
    return replace_confusables(text.casefold())


def _identity(index: int) -> int:
    return index


def _folded_view(text: str) -> tuple[str, Callable[[int], int]]:
    """The folded view and a function mapping a view index back to a text index."""
    view, to_source, _ = _folded_view_maps(text, None)
    return view, to_source


def _folded_view_maps(
    text: str, view: str | None
) -> tuple[str, Callable[[int], int], Callable[[int], int]]:
    """The folded view, a function mapping a view index back to a text index, and one
    mapping a text index (``len(text)`` included) to where that character starts in the view.
    ``view`` is ``fold(text)`` when the caller already has it.

    The map of where casefolding expanded a character is built on the first call only: a
    pass that finds no token (the last pass of every cleaning) never scans the text for it.
    """
    if view is None:
        view = fold(text)
    if len(view) == len(text):
        return view, _identity, _identity
    view_starts: list[int] = []
    view_ends: list[int] = []
    sources: list[int] = []

    def build() -> None:
        shift = 0
        for source in _expanding_positions(text):
            view_starts.append(source + shift)
            shift += len(text[source].casefold()) - 1
            view_ends.append(source + shift + 1)
            sources.append(source)

    def to_source(index: int) -> int:
        if not sources:
            build()  # the view is longer than the text, so there is at least one expansion
        k = bisect_right(view_starts, index) - 1
        if k < 0:
            return index
        if index < view_ends[k]:
            return sources[k]  # inside one character's expansion
        return index - (view_ends[k] - sources[k] - 1)

    def to_view(index: int) -> int:
        if not sources:
            build()
        k = bisect_left(sources, index)  # expanding characters before text[index]
        if k == 0:
            return index
        return index + (view_ends[k - 1] - sources[k - 1] - 1)

    return view, to_source, to_view


# --------------------------------------------------------------------------------------------
# Chat-template control tokens
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControlToken:
    """A chat-template control token as its tokenizer config spells it."""

    text: str
    family: str
    source: str


# To add a family: append its special tokens here with the file you read them from. Tokens of
# the "<|name|>" shape are already caught by GENERIC_TOKEN_PATTERNS; listing them still
# documents the family and keeps the tests honest.
CHAT_TEMPLATE_TOKENS: tuple[ControlToken, ...] = (
    # ChatML (OpenAI ChatML spec; Qwen2/2.5/3 tokenizer_config.json added_tokens; Yi, Hermes).
    ControlToken("<|im_start|>", "chatml", "openai/openai-python chatml.md; Qwen tokenizer"),
    ControlToken("<|im_end|>", "chatml", "openai/openai-python chatml.md; Qwen tokenizer"),
    ControlToken("<|im_sep|>", "chatml", "microsoft/phi-4 tokenizer_config.json"),
    ControlToken("<|endoftext|>", "chatml", "GPT-2/tiktoken, Qwen, Phi tokenizer configs"),
    ControlToken("<|startoftext|>", "chatml", "openai/gpt-oss tokenizer_config.json"),
    ControlToken("<|fim_prefix|>", "chatml", "Qwen2.5-Coder tokenizer_config.json"),
    ControlToken("<|fim_middle|>", "chatml", "Qwen2.5-Coder tokenizer_config.json"),
    ControlToken("<|fim_suffix|>", "chatml", "Qwen2.5-Coder tokenizer_config.json"),
    ControlToken("<tool_call>", "chatml", "Qwen2.5/Qwen3 tokenizer_config.json"),
    ControlToken("</tool_call>", "chatml", "Qwen2.5/Qwen3 tokenizer_config.json"),
    ControlToken("<tool_response>", "chatml", "Qwen2.5/Qwen3 chat template"),
    ControlToken("</tool_response>", "chatml", "Qwen2.5/Qwen3 chat template"),
    ControlToken("<think>", "chatml", "Qwen3 / DeepSeek-R1 tokenizer_config.json"),
    ControlToken("</think>", "chatml", "Qwen3 / DeepSeek-R1 tokenizer_config.json"),
    # Llama 2 (meta-llama/llama generation.py: B_INST, E_INST, B_SYS, E_SYS; SentencePiece BOS/EOS).
    ControlToken("[INST]", "llama2", "meta-llama/llama llama/generation.py B_INST"),
    ControlToken("[/INST]", "llama2", "meta-llama/llama llama/generation.py E_INST"),
    ControlToken("<<SYS>>", "llama2", "meta-llama/llama llama/generation.py B_SYS"),
    ControlToken("<</SYS>>", "llama2", "meta-llama/llama llama/generation.py E_SYS"),
    ControlToken("<s>", "llama2", "Llama 2 / Mistral SentencePiece bos_token"),
    ControlToken("</s>", "llama2", "Llama 2 / Mistral SentencePiece eos_token"),
    # Llama 3 / 3.1 / 4 (meta-llama/llama-models tokenizer.py special_tokens; Llama 4 header_*).
    ControlToken("<|begin_of_text|>", "llama3", "meta-llama/llama-models llama3 tokenizer.py"),
    ControlToken("<|end_of_text|>", "llama3", "meta-llama/llama-models llama3 tokenizer.py"),
    ControlToken("<|start_header_id|>", "llama3", "meta-llama/llama-models llama3 tokenizer.py"),
    ControlToken("<|end_header_id|>", "llama3", "meta-llama/llama-models llama3 tokenizer.py"),
    ControlToken("<|eot_id|>", "llama3", "meta-llama/llama-models llama3 tokenizer.py"),
    ControlToken("<|eom_id|>", "llama3", "meta-llama/llama-models llama3.1 tokenizer.py"),
    ControlToken("<|python_tag|>", "llama3", "meta-llama/llama-models llama3.1 tokenizer.py"),
    ControlToken("<|header_start|>", "llama3", "meta-llama/llama-models llama4 tokenizer.py"),
    ControlToken("<|header_end|>", "llama3", "meta-llama/llama-models llama4 tokenizer.py"),
    ControlToken("<|eot|>", "llama3", "meta-llama/llama-models llama4 tokenizer.py"),
    # Gemma (google/gemma-* tokenizer_config.json; Gemma formatting docs).
    ControlToken("<start_of_turn>", "gemma", "ai.google.dev/gemma/docs/formatting"),
    ControlToken("<end_of_turn>", "gemma", "ai.google.dev/gemma/docs/formatting"),
    ControlToken("<bos>", "gemma", "google/gemma tokenizer_config.json bos_token"),
    ControlToken("<eos>", "gemma", "google/gemma tokenizer_config.json eos_token"),
    # Mistral (mistralai/mistral-common SpecialTokens; cookbook tokenization/templates.md).
    ControlToken("[SYSTEM_PROMPT]", "mistral", "mistral-common tokens/tokenizers/base.py"),
    ControlToken("[/SYSTEM_PROMPT]", "mistral", "mistral-common tokens/tokenizers/base.py"),
    ControlToken("[AVAILABLE_TOOLS]", "mistral", "mistral-common tokens/tokenizers/base.py"),
    ControlToken("[/AVAILABLE_TOOLS]", "mistral", "mistral-common tokens/tokenizers/base.py"),
    ControlToken("[TOOL_CALLS]", "mistral", "mistral-common tokens/tokenizers/base.py"),
    ControlToken("[TOOL_RESULTS]", "mistral", "mistral-common tokens/tokenizers/base.py"),
    ControlToken("[/TOOL_RESULTS]", "mistral", "mistral-common tokens/tokenizers/base.py"),
    ControlToken("[TOOL_CONTENT]", "mistral", "mistral-common tokens/tokenizers/base.py"),
    ControlToken("[THINK]", "mistral", "mistral-common tokens/tokenizers/base.py (Magistral)"),
    ControlToken("[/THINK]", "mistral", "mistral-common tokens/tokenizers/base.py (Magistral)"),
    # Phi-3, Zephyr, GLM (microsoft/Phi-3-* and THUDM/glm-4 tokenizer_config.json).
    ControlToken("<|system|>", "phi", "microsoft/Phi-3-mini-4k-instruct tokenizer_config.json"),
    ControlToken("<|user|>", "phi", "microsoft/Phi-3-mini-4k-instruct tokenizer_config.json"),
    ControlToken("<|assistant|>", "phi", "microsoft/Phi-3-mini-4k-instruct tokenizer_config"),
    ControlToken("<|end|>", "phi", "microsoft/Phi-3-mini-4k-instruct tokenizer_config.json"),
    ControlToken("<|observation|>", "phi", "THUDM/glm-4-9b-chat tokenizer_config.json"),
    ControlToken("[gMASK]", "phi", "THUDM/glm-4-9b-chat tokenizer_config.json"),
    ControlToken("<sop>", "phi", "THUDM/glm-4-9b-chat tokenizer_config.json"),
    # OpenAI harmony (openai/harmony; gpt-oss tokenizer_config.json).
    ControlToken("<|start|>", "harmony", "openai/harmony docs; gpt-oss tokenizer_config.json"),
    ControlToken("<|message|>", "harmony", "openai/harmony docs; gpt-oss tokenizer_config.json"),
    ControlToken("<|channel|>", "harmony", "openai/harmony docs; gpt-oss tokenizer_config.json"),
    ControlToken("<|return|>", "harmony", "openai/harmony docs; gpt-oss tokenizer_config.json"),
    ControlToken("<|call|>", "harmony", "openai/harmony docs; gpt-oss tokenizer_config.json"),
    ControlToken("<|constrain|>", "harmony", "openai/harmony; gpt-oss tokenizer_config.json"),
    # Cohere Command-R (CohereForAI/c4ai-command-r tokenizer_config.json).
    ControlToken("<|START_OF_TURN_TOKEN|>", "cohere", "c4ai-command-r tokenizer_config.json"),
    ControlToken("<|END_OF_TURN_TOKEN|>", "cohere", "c4ai-command-r tokenizer_config.json"),
    ControlToken("<|SYSTEM_TOKEN|>", "cohere", "c4ai-command-r tokenizer_config.json"),
    ControlToken("<|USER_TOKEN|>", "cohere", "c4ai-command-r tokenizer_config.json"),
    ControlToken("<|CHATBOT_TOKEN|>", "cohere", "c4ai-command-r tokenizer_config.json"),
    ControlToken("<BOS_TOKEN>", "cohere", "c4ai-command-r tokenizer_config.json"),
    # DeepSeek V3/R1 (deepseek-ai/DeepSeek-V3 tokenizer_config.json; fullwidth bar U+FF5C and
    # U+2581, which NFKC turns into "|" and leaves as "▁").
    ControlToken(
        "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "deepseek", "deepseek-ai/DeepSeek-V3 tokenizer"
    ),
    ControlToken(
        "<\uff5cend\u2581of\u2581sentence\uff5c>", "deepseek", "deepseek-ai/DeepSeek-V3 tokenizer"
    ),
    ControlToken("<\uff5cUser\uff5c>", "deepseek", "deepseek-ai/DeepSeek-V3 tokenizer_config.json"),
    ControlToken(
        "<\uff5cAssistant\uff5c>", "deepseek", "deepseek-ai/DeepSeek-V3 tokenizer_config.json"
    ),
    # XML-style role tags several templates and agent frameworks use as turn delimiters.
    ControlToken("<system>", "xml_roles", "common prompt-template role tags"),
    ControlToken("</system>", "xml_roles", "common prompt-template role tags"),
    ControlToken("<user>", "xml_roles", "common prompt-template role tags"),
    ControlToken("</user>", "xml_roles", "common prompt-template role tags"),
    ControlToken("<assistant>", "xml_roles", "common prompt-template role tags"),
    ControlToken("</assistant>", "xml_roles", "common prompt-template role tags"),
    # Generic begin/end/pad tokens (BERT/T5/GPT-NeoX vocabularies).
    ControlToken("<unk>", "generic", "SentencePiece default unk_token"),
    ControlToken("<pad>", "generic", "SentencePiece / T5 pad_token"),
    ControlToken("<mask>", "generic", "RoBERTa mask_token"),
    ControlToken("[CLS]", "generic", "BERT vocab.txt"),
    ControlToken("[SEP]", "generic", "BERT vocab.txt"),
    ControlToken("[MASK]", "generic", "BERT vocab.txt"),
    ControlToken("[PAD]", "generic", "BERT vocab.txt"),
    ControlToken("[UNK]", "generic", "BERT vocab.txt"),
)


@dataclass(frozen=True, slots=True)
class TokenPattern:
    """A regex (over the folded view) for a whole shape of token rather than one spelling."""

    name: str
    pattern: str
    source: str


GENERIC_TOKEN_PATTERNS: tuple[TokenPattern, ...] = (
    # "<|anything|>" is the special-token shape of tiktoken-style vocabularies: ChatML, Llama 3
    # reserved tokens (<|reserved_special_token_N|>), Phi, GLM, harmony, Command-R, DeepSeek
    # after NFKC. Ordinary prose practically never writes "<|" ... "|>".
    TokenPattern(
        "pipe_token", r"<\s*\|[^|<>]{1,64}\|\s*>", "tiktoken / HF added_tokens naming convention"
    ),
)

# Role names that start a turn in some chat template or agent framework when they open a line
# followed by a colon: Anthropic's legacy "\n\nHuman:" / "\n\nAssistant:" (anthropic-sdk-python
# HUMAN_PROMPT / AI_PROMPT), "User:" / "System:" / "Assistant:" of plain-text templates
# (Vicuna, FastChat conv templates, OpenAI completion-era prompts), "Developer:" / "Tool:" of
# the OpenAI model spec roles, Llama 3.1 "ipython", Gemma "model", and the authority names
# injections impersonate ("Admin:", "Operator:", "Synapsia:"). Sources: FastChat
# conversation.py, openai/model_spec, meta-llama/llama-models prompt_format.md, Gemma docs.
ROLE_WORDS: tuple[str, ...] = (
    "system",
    "user",
    "human",
    "assistant",
    "developer",
    "tool",
    "tools",
    "function",
    "ipython",
    "model",
    "ai",
    "bot",
    "chatbot",
    "gpt",
    "chatgpt",
    "llm",
    "admin",
    "administrator",
    "operator",
    "moderator",
    "synapsia",
    "root",
    "sudo",
)
# Role names that claim authority: removing one also counts as a fake notice.
AUTHORITY_ROLE_WORDS: frozenset[str] = frozenset(
    {
        "system",
        "developer",
        "admin",
        "administrator",
        "operator",
        "moderator",
        "synapsia",
        "root",
        "sudo",
        "instruction",
        "instructions",
        "important",
        "override",
        "urgent",
        "critical",
        "priority",
        "directive",
        "command",
        "policy",
        "sys",
    }
)
# Kept for the catalogue's readers: the two markers the fence removed before role markers
# generalised (they are ROLE_WORDS now).
LINE_MARKER_WORDS: tuple[str, ...] = ("human", "assistant")
# Headers of Alpaca-style templates ("### Instruction:", "### Response:") and markdown headers
# naming a role ("## System"). Source: tatsu-lab/stanford_alpaca PROMPT_DICT; Vicuna v0.
HEADER_ROLE_WORDS: tuple[str, ...] = (
    *ROLE_WORDS,
    "instruction",
    "instructions",
    "input",
    "response",
    "context",
    "prompt",
    "system prompt",
)
# What may stand before a role marker on its line and still leave it starting the turn:
# whitespace and markdown (blockquote, emphasis, list bullets, numbered lists, table bars).
_LEAD = r"[ \t]*(?:(?:[>*_~`|\-+•·]|\d{1,3}[.)])[ \t]*)*"
# Before a role and its colon a heading's hashes may stand among the rest ("### > User:",
# "> ## System:"): still a turn starter. One symbol per repeat keeps it linear.
_LEAD_OR_HEADING = r"[ \t]*(?:(?:[>*_~`|\-+•·#]|\d{1,3}[.)])[ \t]*)*"
_EMPHASIS = r"[*_`~]*"
_ROLES = "|".join(sorted((re.escape(w) for w in ROLE_WORDS), key=len, reverse=True))
_HEADERS = "|".join(
    sorted((w.replace(" ", r"[ \t]+") for w in HEADER_ROLE_WORDS), key=len, reverse=True)
)
_ROLE_QUALIFIER = (
    r"(?:[ \t]+(?:message|prompt|notice|note|turn|instructions?|override|update|alert|says"
    r"|response|reply|request|command|mode))?"
)
_ONE_LINE_ROLE = (
    rf"{_LEAD_OR_HEADING}{_EMPHASIS}[ \t]*(?:{_ROLES}){_ROLE_QUALIFIER}[ \t]*{_EMPHASIS}[ \t]*"
    rf"(?:\([^()\n]{{0,32}}\)[ \t]*)?{_EMPHASIS}[ \t]*:{_EMPHASIS}"
)
_HEADER_ROLE = (
    rf"{_LEAD}#{{1,6}}[ \t]*{_EMPHASIS}[ \t]*(?:{_HEADERS}){_ROLE_QUALIFIER}[ \t]*{_EMPHASIS}"
    rf"[ \t]*(?::{_EMPHASIS}|(?=[ \t]*$))"
)
# One regex for every line-start role marker, repeats included ("User: System: …").
LINE_ROLE_PATTERN = rf"^(?:{_HEADER_ROLE}|{_ONE_LINE_ROLE})+"

# Bracketed roles anywhere ("[system]", "[SYSTEM NOTICE]", "[/user]"): several agent
# benchmarks and document-injection kits use them as turn delimiters (garak latentinjection
# "[system]" separators); nothing in dinner chat needs them.
BRACKET_ROLE_PATTERN = (
    rf"\[\s*/?\s*(?:{_ROLES}|instructions?|important)(?:[\s_\-]+(?:[a-z]+)){{0,3}}\s*\]"
)
# Instruction pseudo-tags of indirect-injection benchmarks and jailbreak kits: "<instructions>",
# "<IMPORTANT>", "<system_prompt>", "<admin>", with optional attributes, opening or closing.
PSEUDO_TAG_WORDS: tuple[str, ...] = (
    "instructions?",
    "important",
    "system[\\s_\\-]*(?:prompt|message|instructions?|note|notice|override|update|config)",
    "sys",
    "admin(?:istrator)?",
    "developer",
    "dev[\\s_\\-]*mode",
    "override",
    "prompt",
    "sudo",
    "root",
    "secret",
    "hidden",
    "priority",
    "urgent",
    "critical",
    "command",
    "directive",
    "policy",
    "rules",
    "operator",
    "tool",
    "function",
    "human",
    "ai",
    "model",
    "developer[\\s_\\-]*message",
    # Round 2 (agentdojo's "<INFORMATION>" and kin): tags that frame a message as a notice.
    "information",
    "info",
    "notice",
    "message",
    "task",
    "request",
    "update",
    "context",
    # Round 5 (agentseal's forged reasoning): tags that pass text off as the reader's own
    # thinking, so a conclusion planted inside reads as one it reached.
    "internal[\\s_\\-]*(?:thoughts?|reasoning|monologue|processing|deliberation)",
    "scratch[\\s_\\-]*pad",
    "thinking",
    "reasoning",
    "deliberation",
)
PSEUDO_TAG_PATTERN = rf"<\s*/?\s*(?:{'|'.join(PSEUDO_TAG_WORDS)})(?:\s+[^<>\n]{{0,64}})?\s*/?\s*>"
# Tokens that open a role header consume the role name after them ("<|im_start|>system",
# "<|start_header_id|>user<|end_header_id|>", "<start_of_turn>model"), so no bare role word
# is left behind to start the turn.
_SEP = r"[\s_\-▁]*"
_HEADER_ROLE_NAMES = r"(?:system|user|assistant|developer|tool|ipython|model|function|human)"
ROLE_HEADER_PATTERNS: tuple[TokenPattern, ...] = (
    TokenPattern(
        "pipe_role_header",
        rf"<\s*\|\s*(?:im{_SEP}start|start{_SEP}header{_SEP}id|header{_SEP}start|start)\s*\|\s*>"
        rf"(?:[ \t]*{_HEADER_ROLE_NAMES}(?![a-z]))?"
        rf"(?:[ \t]*<\s*\|\s*(?:end{_SEP}header{_SEP}id|header{_SEP}end)\s*\|\s*>)?",
        "ChatML <|im_start|>ROLE; Llama 3 header ids; Llama 4 header_start; harmony <|start|>",
    ),
    TokenPattern(
        "gemma_role_header",
        rf"<\s*start{_SEP}of{_SEP}turn\s*>(?:[ \t]*{_HEADER_ROLE_NAMES}(?![a-z]))?",
        "ai.google.dev/gemma/docs/formatting",
    ),
)


# Anything that looks like the start of our own fence (or of a sibling trusted block the room
# might add) is deleted, so peer text can neither close its fence nor open a fake one. The
# boundary also carries an unguessable nonce; this is the second lock. A forged boundary goes
# whole: its attributes and closing ">>" too (up to 256 characters on its line), so no tail
# such as ' source="peer" nonce="…">>' is left for the reader to take for a boundary.
_FORGED_TAIL = r"(?:[^\n<>]{0,256}(?:>{1,2}|(?=[\n<]|\Z)))?"
FENCE_MARKER_PATTERNS: tuple[TokenPattern, ...] = (
    TokenPattern(
        "untrusted_marker",
        rf"<<*\s*/*\s*(?:un[\s_\-]*)?trusted{_FORGED_TAIL}",
        "rooms.untrusted fence format (<<untrusted …>> / <</untrusted …>>)",
    ),
    TokenPattern(
        "room_block_marker",
        r"<<\s*/*\s*(?:system|charter|preamble|whisper|owner|notice|synapsia|fence|context|peer)"
        rf"{_FORGED_TAIL}",
        "double-angle markers reserved for trusted room blocks",
    ),
)


def _literal_pattern(literal: str) -> str:
    """Regex for one token spelling: folded, whitespace-tolerant around punctuation."""
    folded = fold(unicodedata.normalize("NFKC", literal))
    pieces: list[str] = []
    previous = ""
    for char in folded:
        if char in "_- ▁":
            kind, piece = "sep", r"[\s_\-▁]*"
        elif char.isalnum():
            kind, piece = "word", re.escape(char)
        else:
            kind, piece = "punct", re.escape(char)
        if pieces and "sep" not in (kind, previous) and "punct" in (kind, previous):
            pieces.append(r"\s*")
        pieces.append(piece)
        previous = kind
    return "".join(pieces)


def _token_regexes() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    # Every alternative starts with a literal "<" or "[", which lets re skip straight to those
    # characters instead of trying ~90 alternatives at every position (a 20x difference).
    fences = [p.pattern for p in FENCE_MARKER_PATTERNS]
    literals = sorted({_literal_pattern(t.text) for t in CHAT_TEMPLATE_TOKENS}, key=len)
    headers = [p.pattern for p in ROLE_HEADER_PATTERNS]
    tokens = headers + [p.pattern for p in GENERIC_TOKEN_PATTERNS] + literals[::-1]
    roles = [PSEUDO_TAG_PATTERN, BRACKET_ROLE_PATTERN]
    # No capturing groups: they would cost re its skip to the next "<" or "[". The kind of a
    # match is told afterwards by matching the fence and role patterns on it alone. Literal
    # tokens win over role tags ("<system>" is a catalogued token), so they come first.
    return (
        re.compile("|".join(fences + tokens + roles)),
        re.compile("|".join(fences)),
        re.compile("|".join(tokens)),
    )


TOKEN_REGEX, FENCE_MARKER_REGEX, _TEMPLATE_TOKEN_REGEX = _token_regexes()
# What every TOKEN_REGEX match starts with (checked on the parsed pattern by
# tests/rooms/test_fence_pass_equivalence.py): "<" or "[", never anything else.
TOKEN_FIRST_CHARACTERS = ("<", "[")


def _token_matches(view: str) -> Iterator[re.Match[str]]:
    """``TOKEN_REGEX.finditer(view)``, trying only the positions of its first characters
    (``_matches_at_first_characters``): re's own search checks every character of the view
    against the pattern's first-character set, about 6 ns a character, which cost a text
    holding one "<" about as much as all its other token patterns together."""
    return _matches_at_first_characters(TOKEN_REGEX, view, TOKEN_FIRST_CHARACTERS)


def _matches_at_first_characters(
    regex: re.Pattern[str], text: str, first: tuple[str, ...]
) -> Iterator[re.Match[str]]:
    """``regex.finditer(text)`` for a pattern whose every match starts with one of ``first``
    and none is empty: ``finditer`` (which tries each position from the end of its last match
    on) then finds exactly the matches that ``match`` finds at those characters' positions,
    taken in order and skipping those inside the previous match (``occurrences``)."""
    position = 0
    match_at = regex.match
    for start in occurrences(text, first):
        if start < position:
            continue  # inside the previous match
        match = match_at(text, start)
        if match is not None:
            yield match
            position = match.end()


# The tail of a boundary written without its head (' source="peer" nonce="…">>', or
# 'untrusted source="peer"'): from the attribute that only our boundary carries to its
# closing ">>", or to the end of the line. Nothing in ordinary text writes nonce="…".
BOUNDARY_TAIL_REGEX = re.compile(
    r"(?:/?\s*(?:un[\s_\-]*)?trusted\s+(?:source|nonce|truncated)\s*=|(?<![\w-])nonce\s*=\s*[\"'])"
    r"[^\n<>]{0,256}(?:>{1,2}|(?=[\n<]|\Z))"
)
# BOUNDARY_TAIL_REGEX, found in linear time (_boundary_tails). Every match holds "trusted"
# (first branch) or starts at "nonce" (second), and before "trusted" its first branch takes
# only "/", whitespace, "un", "_" and "-": so a match can only start in the run of those
# characters right before an occurrence of either word. The guarded form refuses to start
# the first branch right after whitespace (unless at a "/"): such a start is never the
# leftmost, as the branch's "\s*" takes that whitespace too. Scanning every position with the
# plain regex rescanned the rest of a whitespace run from each of its positions (8,000 spaces
# and one "trusted" cost 0.7 s), and cost ~60 ns a character on any text holding the words.
_BOUNDARY_TAIL_WORD = re.compile("trusted|nonce")
_BOUNDARY_TAIL_LEAD = frozenset("/_-un")
_BOUNDARY_TAIL_GUARDED = re.compile(
    r"(?:(?:(?<!\s)|(?=/))/?\s*(?:un[\s_\-]*)?trusted\s+(?:source|nonce|truncated)\s*="
    r"|(?<![\w-])nonce\s*=\s*[\"'])"
    r"[^\n<>]{0,256}(?:>{1,2}|(?=[\n<]|\Z))"
)
_SPACE = re.compile(r"\s")
# What follows a match's word, from the word on: a match using the "trusted" at ``core`` has
# ``trusted\s+(?:source|nonce|truncated)\s*=`` there, one using the "nonce" at ``core`` has
# ``nonce\s*=\s*["']`` (see _boundary_tails); where neither stands, no start is tried.
_BOUNDARY_TAIL_CORE = re.compile(r"trusted\s+(?:source|nonce|truncated)\s*=|nonce\s*=\s*[\"']")


def _boundary_tail_words(view: str) -> list[int]:
    """The starts of ``_BOUNDARY_TAIL_WORD.finditer(view)``, by ``str.find`` (C-speed, where
    re tries the alternation at every position). Neither word can overlap itself or the
    other (no proper suffix of one is a prefix of either), so the occurrences of both, in
    order, are exactly the matches."""
    return occurrences(view, ("trusted", "nonce"))


def _boundary_tails(view: str) -> list[tuple[int, int]]:
    """The spans of ``BOUNDARY_TAIL_REGEX.finditer(view)``, trying only the positions where
    a match can start, so in linear time whatever the text holds."""
    spans: list[tuple[int, int]] = []
    position = 0  # where finditer's next search would start
    for core in _boundary_tail_words(view):
        if core < position:
            continue  # inside the previous match
        if _BOUNDARY_TAIL_CORE.match(view, core) is None:
            # A match starting in the lead before ``core`` has its word at ``core``: the lead
            # holds only "/", "_", "-", "u", "n" and whitespace, so the first branch's prefix
            # stops at the first "t" (its "trusted" starts at a "trusted" core), and cannot
            # run through a "nonce" core's "n" ("un" there is followed by "o"); the second
            # branch starts at its "nonce", and no "nonce" starts in the lead of another
            # (no proper suffix of "nonce" is a prefix of it). So none can start here.
            continue
        lead = core
        while lead > position and (
            view[lead - 1] in _BOUNDARY_TAIL_LEAD or _SPACE.match(view, lead - 1)
        ):
            lead -= 1
        for start in range(lead, core + 1):
            if start == position and start and _SPACE.match(view, start - 1):
                # The search resumes inside a whitespace run: here the plain regex decides.
                match = BOUNDARY_TAIL_REGEX.match(view, start)
            else:
                match = _BOUNDARY_TAIL_GUARDED.match(view, start)
            if match is not None:
                spans.append(match.span())
                position = match.end()
                break
    return spans


LINE_MARKER_REGEX = re.compile(LINE_ROLE_PATTERN, re.MULTILINE)
# LINE_MARKER_REGEX after its line's newline: a literal first character lets re jump from
# newline to newline instead of trying "^" at every position (_line_markers).
_LINE_MARKER_AFTER_NEWLINE = re.compile("\n" + LINE_ROLE_PATTERN.removeprefix("^"), re.MULTILINE)


def _line_markers(view: str) -> Iterator[tuple[int, int]]:
    """The spans of ``LINE_MARKER_REGEX.finditer(view)``, found line start by line start.

    A marker never holds a newline (its parts take spaces and tabs only) and is never empty,
    so each starts at a line start (0, or after a newline) and ends inside its line: the
    search after a match resumes where no line starts, and ``finditer`` tries exactly the
    line starts after it, in order, as the newline-led pattern does."""
    position = 0
    first = LINE_MARKER_REGEX.match(view)
    if first is not None:
        yield first.span()
        position = first.end()
    for match in _LINE_MARKER_AFTER_NEWLINE.finditer(view, position):
        yield match.start() + 1, match.end()


_AUTHORITY_IN_MARKER = re.compile(
    rf"(?<![a-z])(?:{'|'.join(sorted(AUTHORITY_ROLE_WORDS))})(?![a-z])"
)


def is_authority_marker(marker: str) -> bool:
    """Whether a removed role marker (folded) claimed system / developer / admin authority."""
    return _AUTHORITY_IN_MARKER.search(marker) is not None


def _role_category(marker: str) -> StripCategory:
    if is_authority_marker(marker):
        return StripCategory.AUTHORITY_MARKER
    return StripCategory.ROLE_MARKER


def find_control_tokens(text: str) -> list[tuple[int, int, StripCategory]]:
    """Spans (in ``text``) of chat-template tokens and fence markers, in order.

    ``text`` should already be NFKC with catalogued code points stripped; the spans cover
    whole characters of ``text`` even where case folding expanded one character into two.
    """
    return _find_control_tokens(text, None)[0]


def _find_control_tokens(
    text: str, view: str | None
) -> tuple[list[tuple[int, int, StripCategory]], str, Callable[[int], int]]:
    """:func:`find_control_tokens`, also taking and giving the folded view (``fold(text)``,
    or ``None`` to fold here) and the text-to-view index map."""
    view, to_source, to_view = _folded_view_maps(text, view)
    found: list[tuple[int, int, StripCategory]] = []
    if "<" in view or "[" in view:
        for match in _token_matches(view):
            start, end = match.start(), match.end()
            if FENCE_MARKER_REGEX.match(view, start, end):
                category = StripCategory.FENCE_MARKER
            elif _TEMPLATE_TOKEN_REGEX.fullmatch(view, start, end):
                category = StripCategory.CHAT_TEMPLATE_TOKEN
            else:
                category = _role_category(view[start:end])
            found.append((to_source(match.start()), to_source(match.end() - 1) + 1, category))
    if "nonce" in view or "trusted" in view:
        for match_start, match_end in _boundary_tails(view):
            start, end = to_source(match_start), to_source(match_end - 1) + 1
            found.append((start, end, StripCategory.FENCE_MARKER))
    if ":" in view or "#" in view:
        for match_start, match_end in _line_markers(view):
            start, end = to_source(match_start), to_source(match_end - 1) + 1
            found.append((start, end, _role_category(view[match_start:match_end])))
    found.sort()
    return found, view, to_view


def strip_control_tokens(text: str) -> tuple[str, Counter[StripCategory]]:
    """Delete every chat-template token and fence marker once (callers loop to a fixpoint)."""
    text, counts, _ = strip_control_tokens_folded(text, None)
    return text, counts


def strip_control_tokens_folded(
    text: str, view: str | None
) -> tuple[str, Counter[StripCategory], str]:
    """:func:`strip_control_tokens`, also taking ``fold(text)`` (or ``None``) and giving
    ``fold`` of the result, so that a caller cleaning in passes folds the text only once.

    The result's view is the kept pieces of ``view``: folding maps each character on its own
    (``str.casefold`` has no context, the lookalike map is 1:1 and no target is a lookalike),
    so the fold of the kept text is the join of the folds of its pieces."""
    counts: Counter[StripCategory] = Counter()
    spans, view, to_view = _find_control_tokens(text, view)
    if not spans:
        return text, counts, view
    pieces: list[str] = []
    view_pieces: list[str] = []
    cursor = 0
    for start, end, category in spans:
        counts[category] += 1
        if end <= cursor:  # nested inside a span already removed
            continue
        kept_end = max(cursor, start)
        pieces.append(text[cursor:kept_end])
        view_pieces.append(view[to_view(cursor) : to_view(kept_end)])
        cursor = end
    pieces.append(text[cursor:])
    view_pieces.append(view[to_view(cursor) :])
    return "".join(pieces), counts, "".join(view_pieces)


# The characters every catalogue token needs: once they are gone no token can be assembled.
TOKEN_PUNCTUATION = frozenset("<>[]|:") | frozenset(
    source for source, target in CONFUSABLES.items() if target in "<>[]|:"
)
_TOKEN_PUNCTUATION_REGEX = re.compile(f"[{char_class(map(ord, TOKEN_PUNCTUATION))}]")


def strip_token_punctuation(text: str) -> tuple[str, int]:
    """Delete every character tokens are built from (the last resort against deep nesting)."""
    return _TOKEN_PUNCTUATION_REGEX.subn("", text)


# --------------------------------------------------------------------------------------------
# Escape sequences and encoded punctuation (applied before the catalogue, every pass)
# --------------------------------------------------------------------------------------------

# ISO 6429 / ECMA-48 escape sequences, whole: CSI (ESC [ or C1 CSI, parameters, intermediates,
# final byte), OSC / DCS / SOS / PM / APC strings up to their terminator (BEL or ST, bounded),
# and the two-character ESC forms. Deleting only ESC would leave "[31m" or "]0;title" visible.
ESCAPE_SEQUENCE_REGEX = re.compile(
    "(?:\x1b\\[|\x9b)[0-?]{0,64}[ -/]{0,8}[@-~]?"
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\\\|\x9c)?"
    "|\x1b[ -/]{0,8}[0-~]?"
)

_ESCAPE_START = re.compile("[\x1b\x90\x98\x9b\x9d-\x9f]")
# The same characters, for the presence check: one ``in`` each is C-speed, the class is not.
_ESCAPE_STARTS = "\x1b\x90\x98\x9b\x9d\x9e\x9f"


def strip_escape_sequences(text: str) -> tuple[str, int]:
    """Delete whole terminal escape sequences; return the text and how many were removed."""
    if not any(char in text for char in _ESCAPE_STARTS):
        return text, 0
    return ESCAPE_SEQUENCE_REGEX.subn("", text)


# HTML character references and percent-encodings of the punctuation tokens and boundaries are
# built from. They are decoded in place (the reader would decode them anyway), so
# "&lt;&lt;/untrusted&gt;&gt;" or "%3C%7Cim_start%7C%3E" meets the catalogue as what it is.
# Percent-encoding is decoded for < > | [ ] only, so ordinary links keep their ":" and "/".
_ENTITY_TARGETS = {
    "lt": "<",
    "gt": ">",
    "vert": "|",
    "verbar": "|",
    "verticalline": "|",
    "lsqb": "[",
    "lbrack": "[",
    "rsqb": "]",
    "rbrack": "]",
    "sol": "/",
    "colon": ":",
    "quot": '"',
    "equals": "=",
    "amp": "&",
}
_NUMERIC_TARGETS = frozenset('<>|[]/:"=&')
_PERCENT_TARGETS = {"3c": "<", "3e": ">", "7c": "|", "5b": "[", "5d": "]"}
ENCODED_PUNCTUATION_REGEX = re.compile(
    r"&(?:(?P<name>lt|gt|vert|verbar|verticalline|lsqb|lbrack|rsqb|rbrack|sol|colon|quot"
    r"|equals|amp)|#0{0,6}(?P<dec>[0-9]{2,3})|#[xX]0{0,6}(?P<hex>[0-9a-fA-F]{2}));?"
    r"|%(?P<pct>3[cCeE]|7[cC]|5[bBdD])",
    re.IGNORECASE,
)


def _decoded(match: re.Match[str]) -> str:
    if match["name"]:
        return _ENTITY_TARGETS[match["name"].lower()]
    if match["pct"]:
        return _PERCENT_TARGETS[match["pct"].lower()]
    char = chr(int(match["dec"])) if match["dec"] else chr(int(match["hex"], 16))
    return char if char in _NUMERIC_TARGETS else match[0]


# What every ENCODED_PUNCTUATION_REGEX match starts with (checked on the parsed pattern by
# tests/rooms/test_fence_pass_equivalence.py).
ENCODED_FIRST_CHARACTERS = ("&", "%")


def decode_encoded_punctuation(text: str) -> tuple[str, int]:
    """Decode entity / percent forms of token punctuation; return the text and the count.

    ``ENCODED_PUNCTUATION_REGEX.sub`` with each match decoded, the matches found at the
    positions of "&" and "%" (``_matches_at_first_characters``: every match starts with one
    and none is empty); re's own search would test every character of the text."""
    if "&" not in text and "%" not in text:
        return text, 0
    count = 0
    pieces: list[str] = []
    position = 0
    for match in _matches_at_first_characters(
        ENCODED_PUNCTUATION_REGEX, text, ENCODED_FIRST_CHARACTERS
    ):
        decoded = _decoded(match)
        if decoded != match[0]:
            count += 1
        pieces.append(text[position : match.start()])
        pieces.append(decoded)
        position = match.end()
    if not pieces:
        return text, 0
    pieces.append(text[position:])
    return "".join(pieces), count
