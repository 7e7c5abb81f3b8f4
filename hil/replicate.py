"""`hil replicate`: run hil in its container exactly as CI does, or print that `docker run`.

    hil replicate [--print | --build-only] [--image TAG | --target host|exynos ...] [--access MODE]
                  [--workspace DIR] [--env NAME]... [--mount SRC:DST[:ro|rw]]...
                  [--from RESULTS_JSON | -- HIL_ARGS...]

Without `--image` the image is built from this checkout (content-hash tag, skipped when
present). `--from` takes the command recorded in a run's results.json, so a CI run's
artifact is enough to reproduce it; it shows that command and runs it only with `--yes` (a
downloaded results.json is input like any other). `action.yml` runs its steps through this
command.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from hil import container
from hil.board.lease import ensure_lease_dir
from hil.errors import InfraError, UsageError
from hil.verdict import EXIT_INFRA
from hil.workflow_safe import trusted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `hil replicate` options."""
    parser.add_argument("--print", dest="print_only", action="store_true",
                        help="print the docker run command instead of running it")
    parser.add_argument("--build-only", action="store_true",
                        help="build the image (unless present) and print its tag; run nothing")
    image = parser.add_argument_group("image")
    image.add_argument("--image", metavar="TAG", help="use this image (default: build one)")
    image.add_argument("--target", default="host", metavar="host|exynos",
                       help="Dockerfile target to build (default: host)")
    image.add_argument("--context", metavar="DIR",
                       help="build context with the Dockerfile (default: this checkout)")
    image.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE",
                       help="a Dockerfile build argument; repeatable (no credentials)")
    image.add_argument("--ca-cert", action="append", default=[], metavar="FILE",
                       help="an extra CA certificate (.crt) for the build; repeatable")
    image.add_argument("--litecore-sdk", metavar="TARBALL",
                       help="LITECORE tarball for --target exynos (else the apikey secret)")
    image.add_argument("--secret", action="append", default=[], metavar="ID=ENV",
                       help="BuildKit secret ID from environment variable ENV, e.g. "
                            "litecore_apikey=HIL_LITECORE_API_KEY; repeatable")
    image.add_argument("--build-network-host", action="store_true",
                       help="build with --network host (an index or wheelhouse on 127.0.0.1)")
    image.add_argument("--docker", default="docker", metavar="CLI",
                       help="docker CLI for BuildKit builds and the printed command")
    run = parser.add_argument_group("run")
    run.add_argument("--access", default="host-adb", metavar="|".join(container.ACCESS_MODES),
                     help="board access (default host-adb: --network host, the host's adb; network: "
                          "network boards only, docker's own network and the container's adb "
                          "server; usb: the container owns the USB bus; none: virtual boards only)")
    run.add_argument("--workspace", default=".", metavar="DIR",
                     help="mounted at /workspace, where hil runs (default: .)")
    run.add_argument("--env", action="append", default=[], metavar="NAME",
                     help="pass this environment variable by name; repeatable")
    run.add_argument("--mount", action="append", default=[], metavar="SRC:DST[:ro|rw]",
                     help="bind a host path (a runner, an inventory, a serial device); repeatable")
    run.add_argument("--cache-dir", metavar="DIR", default=os.environ.get("HIL_CACHE_DIR") or None,
                     help="the lowering cache to keep across runs: bound read-write into the "
                          "container as its HIL_CACHE_DIR (default: $HIL_CACHE_DIR; none: the "
                          "cache dies with the container)")
    run.add_argument("--from", dest="from_results", metavar="RESULTS_JSON",
                     help="replay the hil command recorded in this results.json (shown first; "
                          "it runs only with --yes)")
    run.add_argument("--yes", action="store_true",
                     help="with --from: run the recorded command (a results.json is input: its "
                          "command may name a manifest that imports code, or flash boards)")
    parser.add_argument("hil_args", nargs=argparse.REMAINDER, metavar="-- HIL_ARGS",
                        help="hil's arguments inside the container (default: run)")


def _pairs(values: list[str], flag: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag}: expected KEY=VALUE, got {value!r}")
        pairs.append((key, rest))
    return tuple(pairs)


def _hil_args(args: argparse.Namespace) -> tuple[str, ...]:
    extra = list(args.hil_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    if args.from_results:
        if extra:
            raise UsageError("--from: give either --from or hil arguments after --, not both")
        path = Path(args.from_results)
        try:
            command = json.loads(path.read_text())["run"]["command"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--from {path}: no run.command ({exc})") from exc
        if not isinstance(command, list) or not all(isinstance(c, str) for c in command) or not command:
            raise UsageError(f"--from {path}: run.command is not a list of strings")
        extra = command[1:] if command[0] == "hil" else command
        if not args.yes and not args.print_only:
            raise UsageError(f"--from {path}: it would run `hil {shlex.join(extra or ['run'])}` in the "
                             "container; read it (a manifest it names runs as code), then add --yes")
    return tuple(extra or ["run"])


def build_spec(args: argparse.Namespace) -> container.BuildSpec:
    """The image build the options describe."""
    context = Path(args.context) if args.context else container.repo_root()
    if context is None:
        raise UsageError("--context: hil is not running from a checkout with a Dockerfile; "
                         "give --context DIR or --image TAG")
    secrets = _pairs(args.secret, "--secret")
    return container.BuildSpec(
        context=context.resolve(), target=args.target,
        build_args=_pairs(args.build_arg, "--build-arg"),
        ca_certs=tuple(Path(c).resolve() for c in args.ca_cert),
        litecore_tarball=Path(args.litecore_sdk).resolve() if args.litecore_sdk else None,
        secrets=secrets, network_host=args.build_network_host,
    )


def command(args: argparse.Namespace) -> int:
    """`hil replicate`: exit code of hil in the container; 2 when docker fails."""
    try:
        return _replicate(args)
    except InfraError as exc:
        sys.stderr.write(f"hil replicate: {exc}\n")
        return EXIT_INFRA


def _replicate(args: argparse.Namespace) -> int:
    workspace = Path(args.workspace).resolve()
    if not workspace.is_dir():
        raise UsageError(f"--workspace: not a folder: {workspace}")
    hil_args = _hil_args(args)
    mounts = tuple(container.Mount.parse(m) for m in args.mount)
    if args.build_only:
        if args.image or args.print_only:
            raise UsageError("--build-only: not with --image or --print")
        tag = container.build_image(build_spec(args), on_log=_err, docker_cli=args.docker)
        sys.stdout.write(tag + "\n")
        return 0
    if args.image:
        image = args.image
    else:
        spec = build_spec(args)
        if args.print_only:
            image = container.image_tag(spec)
            sys.stderr.write(f"hil replicate: image {image} is this checkout's; build it with "
                             "`hil replicate` (without --print) if you do not have it\n")
        else:
            image = container.build_image(spec, on_log=_out, docker_cli=args.docker)
    run = container.RunSpec(image=image, args=hil_args, workspace=workspace, access=args.access,
                            env=tuple(args.env), mounts=mounts, cache_dir=_cache_dir(args.cache_dir))
    if args.print_only:
        if run.access in container.BOARD_ACCESS:
            ensure_lease_dir()  # the printed command binds it
        sys.stdout.write(container.format_command(container.run_argv(run, args.docker)) + "\n")
        return 0
    return container.run_container(run, on_output=_out_of_hil)


def _cache_dir(flag: str | None) -> Path | None:
    """`--cache-dir` made ready (created: docker would create it root-owned); None without."""
    if not flag:
        return None
    from hil.commands.common import writable

    return writable(flag, "--cache-dir", folder=True)


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _out_of_hil(line: str) -> None:
    """A line of hil's output in the container: passed as it is (that hil keeps a board's text
    from becoming a workflow command, and its own annotations must stay commands)."""
    stream = trusted(sys.stdout)
    stream.write(line + "\n")
    stream.flush()


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
