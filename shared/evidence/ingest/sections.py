"""Section headings → a canonical vocabulary (seed 002), extensible per domain by configuration.

A label calls the same section "4 CONTRAINDICATIONS", "Contra-indications", "4.3 Contraindications"
(an EU SmPC) or gives it a LOINC code (FDA SPL). Retrieval asks for `contraindications`. The
vocabulary maps both: a LOINC code when the source has one, else the heading's words.

Matching a heading: numbering ("12.3", "Part II", "Section 4"), emphasis and punctuation are
stripped and the text is case-folded; then the alias that starts **earliest** in the heading wins
(the longest at the same position), because a heading leads with its topic: "Dosage in Patients
with Renal Impairment" is about dosage, "Renal Impairment" about renal impairment. A heading that
matches nothing inherits its parent's canonical name ("Absorption" under "12.3 Pharmacokinetics").

Every section gets a *path* of canonical names from the top heading down, so a request for
`pharmacology` finds the spans under "12.3 Pharmacokinetics" too.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from evidence.ids import content_hash
from evidence.ingest.entities import entity_aliases, subject_names
from evidence.ingest.offsets import SourceOffsets
from evidence.records import DocumentChunks, ParsedDocument, Section

#: canonical name → aliases (lower case, words separated by single spaces). Order does not matter.
DEFAULT_ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "boxed_warning": ("boxed warning", "black box warning"),
        "indications": (
            "indications and usage", "indications", "indication", "indications and clinical use",
            "therapeutic indications", "uses", "what is it used for", "what it is used for",
        ),
        "dosage": (
            "dosage and administration", "dosage", "dosing", "dose", "doses", "posology",
            "posology and method of administration", "method of administration", "administration",
            "recommended dosage", "recommended dose", "how to take", "how to use", "dose adjustment",
            "dosage adjustment", "dosage modifications", "dose modification",
        ),
        "dosage_forms": (
            "dosage forms and strengths", "dosage forms", "dosage form", "strengths",
            "pharmaceutical form", "dosage forms composition and packaging",
        ),
        "contraindications": (
            "contraindications", "contraindication", "contra indications", "when not to use",
        ),
        "warnings": (
            "warnings and precautions", "warnings", "warning", "precautions", "general precautions",
            "special warnings and precautions for use", "special warnings and precautions",
        ),
        "adverse_reactions": (
            "adverse reactions", "adverse reaction", "adverse effects", "side effects", "undesirable effects",
            "adverse events", "clinical trials experience", "postmarketing experience",
            "post marketing experience", "post market adverse drug reactions",
        ),
        "interactions": (
            "drug interactions", "interactions", "interaction", "drug drug interactions",
            "interaction with other medicinal products and other forms of interaction",
            "interaction with other medicinal products",
        ),
        "special_populations": ("use in specific populations", "specific populations", "special populations"),
        "pregnancy": (
            "pregnancy", "fertility pregnancy and lactation", "pregnancy and lactation",
            "teratogenic effects", "females and males of reproductive potential",
        ),
        "lactation": ("lactation", "nursing mothers", "breastfeeding", "breast feeding"),
        "pediatric": ("pediatric use", "paediatric use", "pediatrics", "paediatric population", "children"),
        "geriatric": ("geriatric use", "geriatrics", "elderly", "use in the elderly", "older patients"),
        "renal_impairment": ("renal impairment", "renal insufficiency", "kidney impairment"),
        "hepatic_impairment": ("hepatic impairment", "hepatic insufficiency", "liver impairment"),
        "overdosage": ("overdosage", "overdose", "symptoms and treatment of overdosage"),
        "composition": (
            "description", "composition", "qualitative and quantitative composition", "list of excipients",
            "ingredients", "what it contains", "what the medicine contains",
        ),
        "pharmacology": (
            "clinical pharmacology", "pharmacology", "action and clinical pharmacology",
            "pharmacological properties",
        ),
        "mechanism_of_action": ("mechanism of action", "mode of action"),
        "pharmacodynamics": ("pharmacodynamics", "pharmacodynamic properties"),
        "pharmacokinetics": (
            "pharmacokinetics", "pharmacokinetic properties", "absorption", "distribution", "metabolism",
            "elimination", "excretion",
        ),
        "nonclinical_toxicology": (
            "nonclinical toxicology", "non clinical toxicology", "preclinical safety data", "toxicology",
            "carcinogenesis mutagenesis impairment of fertility", "carcinogenesis",
        ),
        "clinical_studies": ("clinical studies", "clinical trials", "clinical efficacy and safety"),
        "storage": (
            "how supplied storage and handling", "how supplied", "storage and handling", "storage",
            "storage and stability", "special precautions for storage", "shelf life", "how to store",
        ),
        "patient_information": (
            "patient counseling information", "patient counselling information", "patient information",
            "information for patients", "consumer information", "medication guide",
            "patient medication information", "instructions for use",
        ),
        "abuse_dependence": ("drug abuse and dependence", "abuse and dependence", "dependence"),
        "references": ("references", "bibliography", "literature cited", "works cited"),
    }
)  # fmt: skip

#: FDA Structured Product Labeling section codes (LOINC) → canonical name.
DEFAULT_LOINC: Mapping[str, str] = MappingProxyType(
    {
        "34066-1": "boxed_warning",
        "34067-9": "indications",
        "34068-7": "dosage",
        "43678-2": "dosage_forms",
        "34070-3": "contraindications",
        "43685-7": "warnings",
        "34071-1": "warnings",
        "42232-9": "warnings",
        "34072-9": "warnings",
        "34084-4": "adverse_reactions",
        "34073-7": "interactions",
        "34074-5": "interactions",
        "43684-0": "special_populations",
        "42228-7": "pregnancy",
        "34077-8": "pregnancy",
        "34078-6": "pregnancy",
        "34079-4": "pregnancy",
        "77290-5": "lactation",
        "34080-2": "lactation",
        "34081-0": "pediatric",
        "34082-8": "geriatric",
        "34088-5": "overdosage",
        "34089-3": "composition",
        "34090-1": "pharmacology",
        "43679-0": "mechanism_of_action",
        "43681-6": "pharmacodynamics",
        "43682-4": "pharmacokinetics",
        "43680-8": "nonclinical_toxicology",
        "34083-6": "nonclinical_toxicology",
        "34092-7": "clinical_studies",
        "34069-5": "storage",
        "44425-7": "storage",
        "34076-0": "patient_information",
        "88436-1": "patient_information",
        "42231-1": "patient_information",
        "42230-3": "patient_information",
        "42227-9": "abuse_dependence",
        "34093-5": "references",
    }
)

_NUMBERING = re.compile(
    r"(?:(?:part|section|chapter)\s+[0-9ivxlc]+[.:)]?\s*|\d+(?:\.\d+)*[.)]?\s+|[ivxlc]+[.)]\s+|[a-z][.)]\s+)",
    re.IGNORECASE,
)
_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalise_heading(heading: str) -> str:
    """ "12.3 Pharmacokinetics:" → "pharmacokinetics"; "HOW SUPPLIED/STORAGE & HANDLING" →
    "how supplied storage and handling"."""
    s = re.sub(r"[*_`#]+", " ", heading).strip()
    # "Part II 4.3 ..." has two layers of numbering: each is skipped by moving a position, not by
    # copying the rest of the heading once per layer (quadratic on a heading of 20,000 "1. ").
    pos = 0
    while (m := _NUMBERING.match(s, pos)) and m.end() > pos:
        pos = m.end()
        while pos < len(s) and s[pos].isspace():
            pos += 1
    s = s[pos:].strip()
    s = s.lower().replace("&", " and ")
    return " ".join(_NON_WORD.sub(" ", s).split())


@dataclass(frozen=True)
class SectionVocabulary:
    """Canonical section names with their heading aliases and source codes (LOINC)."""

    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: DEFAULT_ALIASES)
    codes: Mapping[str, str] = field(default_factory=lambda: DEFAULT_LOINC)

    def __post_init__(self) -> None:
        table: dict[str, str] = {}
        for name, words in self.aliases.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
                raise ValueError(f"canonical section name {name!r} must be lower_snake_case")
            table[name.replace("_", " ")] = name
            for alias in words:
                key = normalise_heading(alias)
                if key:
                    table.setdefault(key, name)
        for code, name in self.codes.items():
            if name not in self.aliases:
                raise ValueError(f"code {code!r} maps to {name!r}, which is not a canonical section")
        object.__setattr__(self, "_table", MappingProxyType(table))
        # One alternation, longest alias first, on word boundaries: finditer gives the earliest.
        ordered = sorted(table, key=lambda a: (-len(a), a))
        pattern = r"(?<![0-9a-z])(?:" + "|".join(re.escape(a) for a in ordered) + r")(?![0-9a-z])"
        object.__setattr__(self, "_pattern", re.compile(pattern))

    @property
    def names(self) -> list[str]:
        return sorted(self.aliases)

    def alias_table(self) -> Mapping[str, str]:
        """normalised alias → canonical name (every alias, and each name spelled with spaces)."""
        table: Mapping[str, str] = object.__getattribute__(self, "_table")
        return table

    def alias_pattern(self) -> re.Pattern[str]:
        """Every alias on word boundaries, longest first (so a match is the longest at its place)."""
        pattern: re.Pattern[str] = object.__getattribute__(self, "_pattern")
        return pattern

    def canonical(self, heading: str, *, code: str | None = None) -> str | None:
        """The canonical name of a heading (or of its source code), None if nothing matches."""
        if code and code in self.codes:
            return self.codes[code]
        norm = normalise_heading(heading)
        if not norm:
            return None
        table = self.alias_table()
        if norm in table:
            return table[norm]
        pattern: re.Pattern[str] = object.__getattribute__(self, "_pattern")
        best: tuple[int, int, str] | None = None
        for m in pattern.finditer(norm):
            cand = (m.start(), -len(m.group()), table[m.group()])
            if best is None or cand < best:
                best = cand
        return best[2] if best else None

    def extended(
        self, extra: Mapping[str, Iterable[str]], codes: Mapping[str, str] | None = None
    ) -> SectionVocabulary:
        """A vocabulary with more canonical names or more aliases for existing ones."""
        merged = {k: tuple(v) for k, v in self.aliases.items()}
        for name, words in extra.items():
            merged[name] = (*merged.get(name, ()), *(str(w) for w in words))
        return SectionVocabulary(aliases=merged, codes={**self.codes, **(codes or {})})

    @classmethod
    def from_config(cls, data: Mapping[str, Any]) -> SectionVocabulary:
        """`{"sections": {name: [aliases]}, "codes": {code: name}, "replace": false}` — a domain's
        vocabulary. With `replace` the defaults are dropped; otherwise the config extends them."""
        sections = data.get("sections", {})
        codes = data.get("codes", {})
        if not isinstance(sections, Mapping) or not all(isinstance(v, list) for v in sections.values()):
            raise ValueError("'sections' must map each canonical name to a list of heading aliases")
        if not isinstance(codes, Mapping):
            raise ValueError("'codes' must map section codes to canonical names")
        if data.get("replace"):
            return cls(aliases={k: tuple(map(str, v)) for k, v in sections.items()}, codes=dict(codes))
        return cls().extended(sections, dict(codes))

    @classmethod
    def from_file(cls, path: Path) -> SectionVocabulary:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"section vocabulary {path}: {exc}") from exc
        if not isinstance(data, Mapping):
            raise ValueError(f"section vocabulary {path}: expected a JSON object")
        return cls.from_config(data)


@lru_cache(maxsize=1)
def default_vocabulary() -> SectionVocabulary:
    return SectionVocabulary()


@dataclass(frozen=True, slots=True)
class SectionLabel:
    """What a section is, for retrieval: its own canonical name and the names of its ancestors."""

    heading: str
    canonical: str  # "" when neither it nor an ancestor matched
    path: tuple[str, ...]  # canonical names from the top heading down, de-duplicated
    parent: str  # the enclosing heading's text, "" at top level


def label_sections(
    sections: Sequence[Section], vocabulary: SectionVocabulary | None = None
) -> list[SectionLabel]:
    """One label per section, in order. Nesting comes from heading levels (flat sections, as the
    parsers produce them: each runs to the next heading of any level)."""
    vocab = vocabulary or default_vocabulary()
    out: list[SectionLabel] = []
    stack: list[tuple[int, str, str, tuple[str, ...]]] = []  # (level, heading, canonical, path)
    for s in sections:
        while stack and stack[-1][0] >= s.level:
            stack.pop()
        own = vocab.canonical(s.name, code=s.code or None)
        parent_canonical = stack[-1][2] if stack else ""
        parent_path = stack[-1][3] if stack else ()
        canonical = own or parent_canonical
        path = parent_path + ((own,) if own and own not in parent_path else ())
        out.append(SectionLabel(s.name, canonical, path, stack[-1][1] if stack else ""))
        stack.append((s.level, s.name, canonical, path))
    return out


# --- annotating chunks ----------------------------------------------------------------------------

ENTITY_KEY = "entity"
ENTITY_NAMES_KEY = "entity_names"
SECTION_CANONICAL_KEY = "section_canonical"
SECTION_PATH_KEY = "section_path"
SECTION_PARENT_KEY = "section_parent"
#: What a user may call the document ("my Apache licence", "the MPL", "Lipitor"): the words of its
#: title, subject names, first headings and file name, and the acronyms of its name; document
#: metadata, so a filter on one word finds the documents it names (`verbatim.scope`).
NAME_TERMS_KEY = "name_terms"
#: The versions the document's name carries ("Version 2, June 1991" under the title, "GPL-2.0.txt"),
#: normalised ("2.0" → "2"): a question that names a version names only documents whose version
#: agrees (`verbatim.scope`).
NAME_VERSIONS_KEY = "name_versions"
#: The words of the document's own name, in order (its title, else its first heading, else its file
#: name), as `name_words` gives them: what tells two documents that share a name apart ("GNU Lesser
#: General Public License" has a word "GPL" does not account for).
NAME_TITLE_KEY = "name_title"
#: Headings read for the name: the first names the document ("Mozilla Public License Version 2.0").
NAME_HEADINGS = 1
#: Characters of the text read for the title block (the title and the line under it, up to the
#: first blank line): "Version 2.1, February 1999".
TITLE_BLOCK_CHARS = 300
#: Words kept: every chunk carries them (OpenSearch filters on chunk fields), so few.
MAX_NAME_TERMS = 24


def document_subject(doc: ParsedDocument, metadata: Mapping[str, Any]) -> list[str]:
    """The subject's names: `--meta entity=…` (comma-separated for several) wins, then what the
    document names itself (SPL's product names), then its title ("BRAND (generic) tablets")."""
    given = metadata.get(ENTITY_KEY)
    if isinstance(given, list):
        return entity_aliases(str(g) for g in given)
    if isinstance(given, str) and given.strip():
        return entity_aliases(p.strip() for p in given.split(","))
    if doc.subject:
        return entity_aliases(doc.subject)
    return subject_names(doc.title) if doc.title else []


_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9]*")
_NAME_WORD = re.compile(r"[a-z][a-z0-9]*")
#: Words too common to name anything (a question's scaffolding, a heading's filler).
_NAME_STOP = frozenset("the of and for to in on a an or by with version".split())
#: A name's parts: "Size and Alignment (libffi: the … library)" is three names, not one.
_NAME_PARTS = re.compile(r"[:;,()\[\]]| - ")
#: Words of a name whose initials a question may use for it ("Lesser Widget Public License").
MAX_ACRONYM_WORDS = 4
_NAME_VERSIONED = re.compile(r"^([a-z]{3,}?)v\d+$")


def name_words(text: str) -> list[str]:
    """Lower-cased words of a name or question as `NAME_TERMS_KEY` holds them (no stemming:
    names are matched as written; a final "s" is dropped so "licences" meets "licence")."""
    out = []
    for found in _NAME_WORD.findall(text.lower()):
        w = _NAME_VERSIONED.sub(r"\1", found)  # "gplv3" is the name "gpl"
        if len(w) < 3 or w in _NAME_STOP:  # "ii", "v2", "d0": too short to name a document
            continue
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def _file_stem(document_id: str) -> str:
    """The document's file name without its folders and extension ("licences/GPL-3.0.txt" →
    "GPL-3.0"): part of what a user may call it."""
    return re.sub(r"\.[A-Za-z0-9]{1,5}$", "", document_id.rsplit("/", 1)[-1])


def document_name_terms(document_id: str, doc: ParsedDocument, names: Sequence[str]) -> list[str]:
    """The words a question may name this document by (`NAME_TERMS_KEY`): those of its title,
    subject names, first headings and file name ("GPL-3.0.txt" → "gpl"), plus the acronyms of its
    title's capitalised words ("Mozilla Public License" → "mpl")."""
    stem = _file_stem(document_id)
    texts = [doc.title, *names, *(s.name for s in doc.sections[:NAME_HEADINGS]), stem.replace("_", " ")]
    out: dict[str, None] = {}
    for t in texts:
        for w in name_words(t or ""):
            out.setdefault(w, None)
    for t in (doc.title, *names):
        caps = _CAPITALISED.findall(t or "")
        for i in range(len(caps) - 2):
            out.setdefault("".join(w[0] for w in caps[i:]).lower(), None)
    # The initials of a short name's own words, the first heading's too (a title-less text's
    # name): "Widget Public License Version 3" → "wpl", as a question says it ("version" and
    # numbers are no part of it); runs of three words or more, in a name of at most four.
    for t in (doc.title, *names, *(s.name for s in doc.sections[:NAME_HEADINGS])):
        for part in _NAME_PARTS.split(t or ""):
            words = name_words(part)
            if len(words) <= MAX_ACRONYM_WORDS:
                for i in range(len(words) - 2):
                    out.setdefault("".join(w[0] for w in words[i:]), None)
    return list(out)[:MAX_NAME_TERMS]


#: A version standing on its own: "version 2", "ver. 3", "v2", "v 2.1" (in a name or a question).
VERSION_PHRASE = re.compile(r"\b(?:version|ver\.?|v)\s?(\d+(?:\.\d+)*)\b", re.IGNORECASE)
#: A file name's trailing number after a separator ("GPL-2.0", "policy-4.6.2.0", "guide_v3").
_STEM_VERSION = re.compile(r"[-_ ]v?(\d+(?:\.\d+)*)$", re.IGNORECASE)


def normal_version(v: str) -> str:
    """ "2.0" and "2" are the same version; "2.1" is not."""
    parts = v.split(".")
    while len(parts) > 1 and parts[-1].strip("0") == "":
        parts.pop()
    return ".".join(str(int(p)) for p in parts)


def _title_block(text: str) -> str:
    block = text.lstrip()[:TITLE_BLOCK_CHARS]
    return re.split(r"\n\s*\n", block, maxsplit=1)[0]


def document_name_versions(document_id: str, doc: ParsedDocument, names: Sequence[str]) -> list[str]:
    """The versions the document's name carries (`NAME_VERSIONS_KEY`): "version N" or "vN" in its
    title, subject names, first heading or title block, and its file name's trailing number. A
    heading's own numbering ("2.3.3 Size and Alignment") is not a version."""
    stem = _file_stem(document_id)
    texts = [doc.title, *names, *(s.name for s in doc.sections[:NAME_HEADINGS]), _title_block(doc.text)]
    found = [m.group(1) for t in texts for m in VERSION_PHRASE.finditer(t or "")]
    if m := _STEM_VERSION.search(stem):
        found.append(m.group(1))
    return list(dict.fromkeys(normal_version(v) for v in found))


def document_name_title(document_id: str, doc: ParsedDocument) -> list[str]:
    """The words of the document's own name (`NAME_TITLE_KEY`): its title, else its first heading,
    else its file name."""
    stem = _file_stem(document_id)
    for t in (doc.title, *(s.name for s in doc.sections[:NAME_HEADINGS]), stem.replace("_", " ")):
        if words := name_words(t or ""):
            return list(dict.fromkeys(words))[:MAX_NAME_TERMS]
    return []


def annotate_chunks(
    chunks: DocumentChunks, doc: ParsedDocument, vocabulary: SectionVocabulary | None = None
) -> DocumentChunks:
    """Record on every chunk its section's canonical name, canonical path and parent heading, and
    on the document (so on every chunk) its subject: `entity` and the filterable `entity_names`."""
    vocab = vocabulary or default_vocabulary()
    labels = label_sections(doc.sections, vocab)
    # Chunk offsets are into the upload itself when parsing changed its line ends.
    at = SourceOffsets(doc.source_text) if doc.source_text is not None else (lambda o: o)
    bounds = [(at(s.char_start), at(s.char_end)) for s in doc.sections]
    starts = [b[0] for b in bounds]
    names = document_subject(doc, chunks.metadata)
    doc_meta = dict(chunks.metadata)
    if names:
        doc_meta[ENTITY_KEY] = names[0]
        doc_meta[ENTITY_NAMES_KEY] = [n.lower() for n in names]
    name_terms = document_name_terms(chunks.document_id, doc, names)
    if name_terms:
        doc_meta[NAME_TERMS_KEY] = name_terms
    if title_words := document_name_title(chunks.document_id, doc):
        doc_meta[NAME_TITLE_KEY] = title_words
    if versions := document_name_versions(chunks.document_id, doc, names):
        doc_meta[NAME_VERSIONS_KEY] = versions
    out = []
    for c in chunks.chunks:
        meta = dict(doc_meta)
        i = bisect_right(starts, c.char_start) - 1
        if i >= 0 and bounds[i][0] <= c.char_start < bounds[i][1]:
            lab = labels[i]
            meta[SECTION_CANONICAL_KEY] = lab.canonical
            meta[SECTION_PATH_KEY] = list(lab.path)
            if lab.parent:
                meta[SECTION_PARENT_KEY] = lab.parent
        out.append(replace(c, metadata=meta))
    fingerprint = json.dumps(
        [
            names,
            name_terms,
            doc_meta.get(NAME_TITLE_KEY),
            doc_meta.get(NAME_VERSIONS_KEY),
            sorted(vocab.alias_table().items()),
            sorted(vocab.codes.items()),
        ]
    )
    return replace(
        chunks,
        chunks=tuple(out),
        metadata=doc_meta,
        content_hash=content_hash(chunks.content_hash + "\x00" + fingerprint),
    )
