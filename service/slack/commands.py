"""What a slash command's text asks, answered as a Block Kit message.

    who-holds <uuid | node/device | driver/pool/device | device> [cluster]
    free [class] [cluster]          waiting [class] [cluster]          idle [cluster]
    not-busy [cluster]              fragmentation [class] [cluster]
    capacity [cluster]              pod <namespace/pod> [cluster]      lint <cluster>
    explain <namespace/claim> [cluster]          history <device> [hours] [cluster]
    plan <manifest YAML | Slack file>            help

`answer(questions, text)` parses the text, asks the question (`service.questions`: the
asker's `Questions`, answered in this process from the store) and renders the reply
(`service.slack.blocks`). Promises: it never raises for anything a person can type —
unknown commands, missing arguments, unknown classes or clusters, a store or history that
cannot be reached all come back as a message saying what went wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dra_mirror.service.questions.asking import BadQuestion, QuestionError, UnknownCluster
from dra_mirror.service.questions.explain import split_target
from dra_mirror.service.questions.protocol import Questions

from . import blocks, busy, facts, replies
from .plan import FileSource, answer_plan

ALIASES = {
    "whoholds": "who-holds",
    "who": "who-holds",
    "holds": "who-holds",
    "pending": "waiting",
    "pod-devices": "pod",
    "notbusy": "not-busy",
    "fragments": "fragmentation",
}
MAX_HOURS = 24 * 90


@dataclass
class Words:
    """`[class] [cluster]` as typed: a word naming a cluster is the cluster."""

    class_name: str | None = None
    cluster: str | None = None
    unknown: list[str] = field(default_factory=list)  # words naming neither


async def read_words(questions: Questions, words: list[str]) -> Words:
    """Which of `words` is a class and which a cluster (order free, at most one of each)."""
    found = Words()
    if not words:
        return found
    clusters = await questions.clusters()
    classes = await questions.class_names()
    for word in words:
        if word in clusters and found.cluster is None:
            found.cluster = word
        elif word in classes and found.class_name is None:
            found.class_name = word
        else:
            found.unknown.append(word)
    return found


async def answer(
    questions: Questions,
    text: str,
    *,
    command: str = "/gpu",
    now: datetime | None = None,
    files: FileSource | None = None,
) -> blocks.Message:
    """The reply to `text`; `now` is the clock of "2h ago", `files` where `plan` reads
    attached manifests."""
    words = text.split()
    if not words or words[0].lower() in {"help", "-h", "--help", "?"}:
        return blocks.render_help(command)
    name = ALIASES.get(words[0].lower(), words[0].lower())
    args = words[1:]
    if name == "plan":  # the manifest is the rest of the text, newlines kept
        return await answer_plan(questions, text.strip()[len(words[0]) :], files=files)
    try:
        reply = await _answer(questions, name, args, command, now)
    except QuestionError as error:
        return blocks.render_error(str(error))
    if reply is not None:
        return reply
    unknown = blocks.render_help(command)
    unknown["blocks"].insert(0, blocks.section(f"Unknown command `{blocks.escape(words[0])}`."))
    unknown["text"] = blocks.escape(f"Unknown command {words[0]}")
    return unknown


async def _answer(
    questions: Questions, name: str, args: list[str], command: str, now: datetime | None
) -> blocks.Message | None:
    if name == "who-holds":
        if not args or len(args) > 2:
            raise BadQuestion(f"usage: {command} who-holds <uuid | node/device | device>")
        cluster = args[1] if len(args) > 1 else None
        held = await questions.who_holds(args[0], cluster)
        reply = replies.render_who_holds(held, now)
        if held.holdings and not held.ambiguous:  # one device: how busy it is, when known
            h = held.holdings[0]
            use = await questions.device_busy(h.cluster, h.driver, h.pool, h.device)
            if use is not None:
                reply["blocks"].append(blocks.context(busy.busy_line(use)))
        return reply
    if name in {"free", "waiting", "fragmentation"}:
        found = await read_words(questions, args)
        if found.unknown:
            raise BadQuestion(f"{' '.join(found.unknown)}: no such class or cluster")
        if name == "fragmentation":
            rows = await questions.fragmentation(found.cluster, class_name=found.class_name)
            where = f" in {found.cluster}" if found.cluster else ""
            return busy.render_fragmentation(rows, where)
        if name == "free":
            return replies.render_free(await questions.free(found.class_name, found.cluster))
        return replies.render_waiting(await questions.waiting(found.class_name, found.cluster))
    if name in {"idle", "capacity", "not-busy"}:
        if len(args) > 1:
            raise BadQuestion(f"usage: {command} {name} [cluster]")
        cluster = args[0] if args else None
        if name == "idle":
            return replies.render_idle(await questions.idle(cluster), now)
        if name == "not-busy":
            return busy.render_not_busy(await questions.held_not_busy(cluster), now)
        return replies.render_capacity(await questions.capacity(cluster), cluster)
    if name == "lint":
        if len(args) != 1:
            raise BadQuestion(f"usage: {command} lint <cluster>")
        return facts.render_lint(await questions.lint(args[0]), args[0])
    if name in {"explain", "pod"}:
        what = "pod" if name == "pod" else "claim"
        cluster, namespace, target = split_target(args, await questions.clusters(), what)
        if name == "pod":
            used = await questions.pod_devices(namespace, target, cluster)
            return replies.render_pod(used, f"{namespace}/{target}")
        explained = await questions.explain(namespace, target, cluster)
        return facts.render_explain(explained, args[0])
    if name == "history":
        return await _history(questions, args, command)
    return None


async def _history(questions: Questions, args: list[str], command: str) -> blocks.Message:
    usage = f"usage: {command} history <device> [hours] [cluster]"
    if not args or len(args) > 3:
        raise BadQuestion(usage)
    hours, cluster = 24.0, None
    for word in args[1:]:
        try:
            hours = float(word)
        except ValueError:
            cluster = word
    if not 0 < hours <= MAX_HOURS:
        raise BadQuestion(f"hours must be more than 0 and at most {MAX_HOURS} (90 days)")
    if cluster is not None and cluster not in (known := await questions.clusters()):
        raise UnknownCluster(cluster, known)
    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(hours=hours)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    timelines = await questions.device_history(
        args[0], start.strftime(stamp), end.strftime(stamp), cluster
    )
    return facts.render_history(timelines, args[0], hours)
