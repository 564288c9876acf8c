"""``manage.py audit_logs``: the recommendation rules on log files, outside the portal."""

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import translation

from efficiency.analysis.recommendations.envfile import parse_env
from efficiency.analysis.recommendations.logfacts import LogFactsBuilder
from efficiency.analysis.recommendations.rules import JOB_RULES, Finding, JobView, Settings, audit_job
from efficiency.management.commands.scan_logs import log_files
from efficiency.recommendation_messages import RULES

SPEEDUPS = {rule.id: rule.speedup for rule in JOB_RULES}
READ_BYTES = 1 << 20


class Command(BaseCommand):
    help = (
        "Check a job's log files (and optionally its environment, KEY=VALUE lines) against the "
        "recommendation rules and print one finding per line. Each PATH is one job: a log file, or "
        "a directory holding its rank logs. Exit status 1 if a path could not be read."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
        parser.add_argument(
            "--env", type=Path, metavar="FILE", help="The job's environment, KEY=VALUE lines."
        )
        parser.add_argument("--format", choices=("json", "text"), default="json")
        parser.add_argument(
            "--rdma",
            choices=("yes", "no", "unknown"),
            default="unknown",
            help="Whether the job's nodes have RDMA (default: judge from the log, else unknown).",
        )
        parser.add_argument("--nodes", type=int, default=0, help="Nodes the job ran on, if known.")
        parser.add_argument("--gpus", type=int, default=0, help="GPUs the job held, if known.")
        parser.add_argument("--gpu-model", default="", help="GPU model, e.g. 'NVIDIA H100 80GB HBM3'.")
        parser.add_argument("--image", default="", help="The job's container image, if known.")

    def handle(self, *args, paths, env, format, rdma, nodes, gpus, gpu_model, image, **options):
        config: dict = {}
        if env is not None:
            try:
                parsed = parse_env(env.read_text(encoding="utf-8", errors="replace"))
            except OSError as exc:
                raise CommandError(f"cannot read {env}: {exc.strerror or exc}", returncode=1) from None
            for number, why in parsed.errors:
                self.stderr.write(f"{env}:{number}: {why}, skipped")
            config["env"] = parsed.values
        if image:
            config["image"] = image
        rules = Settings(**settings.PORTAL_RECOMMENDATIONS)
        failed = 0
        for top in paths:
            builder = LogFactsBuilder()
            read_any = False
            for path, error in log_files(top):
                if error is not None:
                    self.stderr.write(error)
                    failed += 1
                    continue
                try:
                    _feed(builder, path)
                    read_any = True
                except OSError as exc:
                    self.stderr.write(f"cannot read {path}: {exc.strerror or exc}")
                    failed += 1
            if not read_any:
                continue
            job = JobView(
                key=str(top),
                gpu_count=gpus,
                node_count=nodes,
                gpu_model=gpu_model,
                rdma={"yes": True, "no": False}.get(rdma),
                config=config,
                log=builder.facts(),
            )
            with translation.override("en"):
                for finding in audit_job(job, rules):
                    self.stdout.write(_render(top, finding, format))
        if failed:
            raise CommandError(f"{failed} path(s) could not be read", returncode=1)


def _feed(builder: LogFactsBuilder, path: Path) -> None:
    """Feed a file in blocks of whole lines: a file of any size in bounded memory."""
    line_no, rest = 1, ""
    with path.open("r", encoding="utf-8", errors="replace", newline="") as handle:
        while block := handle.read(READ_BYTES):
            text = rest + block
            cut = text.rfind("\n") + 1
            if cut:
                builder.feed_text(str(path), line_no, text[:cut])
                line_no += text.count("\n", 0, cut)
            rest = text[cut:]
        if rest:
            builder.feed_text(str(path), line_no, rest + "\n")


def _render(top: Path, finding: Finding, format: str) -> str:
    text = RULES.get(finding.rule)
    file = finding.evidence[0].file if finding.evidence else str(top)
    speedup = SPEEDUPS.get(finding.rule)
    if format == "json":
        return json.dumps(
            {
                "file": file,
                "rule": finding.rule,
                "observed": finding.observed,
                "ideal": finding.ideal,
                "change": finding.change,
                "evidence": [{"file": e.file, "line": e.line, "text": e.text} for e in finding.evidence],
                "config": [list(row) for row in finding.config],
                "expected_gain": {
                    "share": round(finding.gain_share, 4),
                    "speedup": speedup,
                    "source": str(text.source) if text else "",
                },
                "confidence": finding.confidence,
                "title": str(text.title) if text else finding.rule,
            },
            ensure_ascii=False,
        )
    where = f"{finding.evidence[0].file}:{finding.evidence[0].line}" if finding.evidence else str(top)
    title = str(text.title) if text else finding.rule
    return (
        f"{where}: {finding.rule} ({finding.confidence}) {title}: observed {finding.observed}; "
        f"ideal {finding.ideal}; change: {finding.change}; expected gain {finding.gain_share:.0%}"
    )
