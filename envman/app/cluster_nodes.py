"""``envman cluster nodes``: a folder of per-node reports (written by a .nodes. sbatch) → the readiness table.
The reports come from every node of a job: each is read bounded (never blocking on a FIFO) and held to the
preflight's schema (cluster/nodes.py) before it is read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envman.app.cluster import FILES_DIR
from envman.errors import UsageError

MAX_REPORT = 1024 * 1024  # one node's report: a few KB; a bigger file is not a preflight report
MAX_REPORTS = 10_000  # files read from one folder


def gather_nodes(reports: Path):
    """The readiness table from a folder of per-node reports (NODE.json, NODE.allreduce.json and
    job.allreduce.json, written by the nodes sbatch): (classes, the job-wide all-reduce line or None, unreadable:
    "NAME (why)" per file that is not a report)."""
    from envman.cluster.nodes import allreduce_line, node_classes, printable, report_problem

    if not reports.is_dir():
        raise UsageError(f"{printable(reports)}: no such folder",
                         hint=f"submit {FILES_DIR}/NAME_<lock12>.nodes.RUNTIME.sbatch first; it prints the folder "
                              "it wrote")
    docs, per_node, unreadable = [], {}, []
    job = None
    for f in sorted(reports.glob("*.json"))[:MAX_REPORTS]:
        doc, why = _last_json(f)
        why = why or report_problem(doc)
        tool = doc.get("tool") if isinstance(doc, dict) else None
        if why is None and tool == "envman-preflight":
            docs.append(doc)
        elif why is None and tool == "envman-allreduce" and f.name == "job.allreduce.json":
            job = allreduce_line(doc)
        elif why is None and tool == "envman-allreduce":
            per_node[f.name[: -len(".allreduce.json")]] = doc
        else:
            unreadable.append(f"{printable(f.name)} ({why or 'not an envman report'})")
    if not docs:
        raise UsageError(f"{printable(reports)}: no preflight report (NODE.json)",
                         hint="see the NODE.log files beside them")
    return node_classes(docs, per_node), job, unreadable


def _last_json(f: Path) -> tuple[Any, str | None]:
    """The last line of a report as JSON, read bounded (never blocking on a FIFO); (None, why) when it is not."""
    from envman.inputs import read_regular_text

    try:
        lines = read_regular_text(f, MAX_REPORT).strip().splitlines()
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except OSError as exc:
        return None, exc.strerror or "unreadable"
    try:
        return json.loads(lines[-1]), None
    except RecursionError:
        return None, "nested too deeply"
    except (ValueError, IndexError):
        return None, "not JSON"
