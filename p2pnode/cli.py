"""The daemon's command line (``python -m p2pnode``): run, simulate, keys, data.

It only maps flags onto ``RunConfig`` and calls the runners. The lab (``p2plab.cli``) builds the
full ``p2pnode`` command from these commands and its own (launch, metrics, experiment, deploy);
``experiment_flags``, ``config_from_args`` and ``print_result`` are what it shares.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from adversary.momentum import ESTIMATORS
from learning.interactions import DataError
from p2pnode.config import (
    MODELS,
    PRESETS,
    PROTOCOLS,
    SAMPLINGS,
    ConfigError,
    RunConfig,
    from_mapping,
    load_toml,
)


class Parser(argparse.ArgumentParser):
    """Bad flags give one clear line on stderr, not a usage dump or a traceback."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def experiment_flags(p: argparse.ArgumentParser, real: bool) -> None:
    g = p.add_argument_group("experiment")
    g.add_argument("--config", type=Path, help="TOML file with RunConfig fields (flags override it)")
    g.add_argument("--preset", choices=sorted(PRESETS), help="named starting configuration")
    g.add_argument("--nodes", type=int, help="network size: nodes = users 0..N-1 (default 943)")
    g.add_argument("--rounds", type=int, help="rounds to run (100 ticks each)")
    g.add_argument("--model", choices=MODELS, help="gmf (HR@K, default) or prme (F1@K)")
    g.add_argument("--protocol", choices=PROTOCOLS, help="base (002 Alg. 1), samo (Alg. 2) or fedavg")
    g.add_argument("--sampling", choices=SAMPLINGS, help="peer sampling service")
    g.add_argument("--view-size", type=int, help="out-view size P (default 3)")
    g.add_argument("--swap-rate", type=float, help="PeerSwap view changes per node per round")
    g.add_argument("--exploration", type=float, help="pers: share of sends to the random view (0.4)")
    g.add_argument("--seed", type=int, help="seed of everything random")
    g.add_argument("--dataset", help="ml-100k (default), synthetic, or a user,item[,timestamp] file")
    g.add_argument("--min-interactions", type=int, help="file datasets: drop users with fewer items")
    g.add_argument("--data-dir", help="dataset directory (default $P2PNODE_DATA or ~/.cache)")
    g.add_argument("--eval-every", type=int, help="evaluate HR@K every N rounds")
    g.add_argument("--samo-buffer", type=int, help="SAMO: most models buffered per node")
    g.add_argument("--fraction", type=float, help="fedavg: share of clients per round (default 1)")
    lg = p.add_argument_group("learning")
    lg.add_argument("--factors", type=int, help="GMF embedding size (default 32)")
    lg.add_argument("--lr", type=float, help="Adam learning rate (default 0.001)")
    lg.add_argument("--batch-size", type=int)
    lg.add_argument("--negatives", type=int, help="negatives per positive (default 4)")
    lg.add_argument("--local-epochs", type=int, help="epochs per local update (default 1)")
    lg.add_argument("--top-k", type=int, help="K of HR@K (default 20)")
    lg.add_argument("--prme-lr", type=float, help="PRME SGD learning rate (default 0.005)")
    lg.add_argument("--prme-dim", type=int, help="PRME embedding size (default 60)")
    lg.add_argument("--share-less", action="store_true", help="keep user embeddings private")
    lg.add_argument("--share-less-tau", type=float, help="item regulariser weight τ (default 0.1)")
    dg = p.add_argument_group("DP-SGD (local, per node; example-level DP)")
    dg.add_argument("--dp-noise", type=float, metavar="SIGMA", help="noise multiplier σ")
    dg.add_argument("--dp-epsilon", type=float, metavar="EPS", help="target ε per node (σ calibrated)")
    dg.add_argument("--dp-clip", type=float, metavar="C", help="per-example clipping bound (default 2)")
    dg.add_argument("--dp-delta", type=float, help="δ (default 1e-6)")
    ag = p.add_argument_group("attack (CIA paper §IV)")
    ag.add_argument("--attack", choices=("cia",), help="run the Community Inference Attack")
    ag.add_argument("--target-k", type=int, metavar="K", help="community size K (default 50)")
    ag.add_argument("--momentum", type=float, metavar="BETA", help="β of eq. 4 (default 0.99)")
    ag.add_argument(
        "--momentum-estimator",
        choices=ESTIMATORS,
        help="reading of eq. 4: v_u starts at 0 with the bias correction v_u/(1-β^n) (debiased, "
        "default), at the first Θ_u (first), at 0 (zero) or at θ_0 (init)",
    )
    ag.add_argument("--attackers", help="gossip: 'all' (default: every node, own items) or ids '3,17'")
    ag.add_argument("--target-items", metavar="IDS", help="V_target as raw item ids '50,172,181'")
    ag.add_argument("--target-genre", metavar="GENRE", help="V_target: an ML-100k genre, e.g. Horror")
    ag.add_argument("--colluders", type=float, metavar="F", help="gossip: share of nodes per colluding group")
    ag.add_argument("--colluder-groups", type=int, help="disjoint colluding groups (default 1)")
    ag.add_argument("--cia-refresh", type=int, help="Share less, gossip: retrain e_A every N wake-ups (10)")
    ag.add_argument(
        "--multicast",
        choices=("v", "theta"),
        help="colluders forward the received Θ_u to their group's read member (theta, default) or "
        "multicast v_u to every member (v, Algorithm 2 line 14)",
    )
    ag.add_argument(
        "--fictive-user",
        action="store_true",
        default=None,
        help="score shared models with a fictive user trained on V_target, as under Share less",
    )
    ag.add_argument("--mia", action="store_true", help="MPE membership inference on every node (002 §2.5)")
    ag.add_argument(
        "--mia-holdout",
        type=int,
        metavar="N",
        help="with --mia: keep each user's N latest training items out of training as non-members",
    )
    ag.add_argument(
        "--mia-proxy",
        nargs="?",
        const="0.2,0.4,0.6,0.8,1",
        metavar="RHOS",
        help="with --attack cia: MIA as a CIA proxy at thresholds ρ (default the paper's 0.2..1)",
    )
    w = p.add_argument_group("wire")
    w.add_argument("--no-delta", action="store_true", help="always send full models")
    w.add_argument("--float16", action="store_true", help="send tensors in half precision")
    if real:
        p.add_argument("--tick-seconds", type=float, help="wall seconds per tick (default 0.01)")
    else:
        s = p.add_argument_group("simulated network")
        s.add_argument("--delay-min", type=float, help="minimum one-way delay in ticks")
        s.add_argument("--delay-max", type=float, help="maximum one-way delay in ticks")
        s.add_argument("--drop", type=float, help="probability that a frame is lost")
    o = p.add_argument_group("output")
    o.add_argument("--out", type=Path, help="directory for result files")
    o.add_argument("--json", action="store_true", help="print one final JSON object")
    o.add_argument("--quiet", action="store_true", help="no progress lines")


_FLAG_FIELDS = {
    "nodes": "nodes",
    "rounds": "rounds",
    "protocol": "protocol",
    "model": "model",
    "sampling": "sampling",
    "view_size": "view_size",
    "swap_rate": "swap_rate",
    "exploration": "exploration",
    "seed": "seed",
    "data_dir": "data_dir",
    "dataset": "dataset",
    "min_interactions": "min_interactions",
    "eval_every": "eval_every",
    "samo_buffer": "samo_buffer",
    "fraction": "fraction",
    "tick_seconds": "tick_seconds",
    "factors": "learning.factors",
    "lr": "learning.lr",
    "batch_size": "learning.batch_size",
    "negatives": "learning.negatives",
    "local_epochs": "learning.local_epochs",
    "top_k": "learning.top_k",
    "share_less_tau": "learning.share_less_tau",
    "prme_lr": "learning.prme_lr",
    "prme_dim": "learning.prme_dim",
    "dp_noise": "learning.dp_noise",
    "attack": "attack.kind",
    "target_k": "attack.target_k",
    "momentum": "attack.momentum",
    "momentum_estimator": "attack.momentum_estimator",
    "attackers": "attack.attackers",
    "target_items": "attack.target_items",
    "target_genre": "attack.target_genre",
    "colluders": "attack.colluders",
    "colluder_groups": "attack.colluder_groups",
    "cia_refresh": "attack.refresh_every",
    "multicast": "attack.multicast",
    "fictive_user": "attack.fictive_user",
    "mia_proxy": "attack.mia_proxy",
    "mia_holdout": "attack.mia_holdout",
    "dp_epsilon": "learning.dp_epsilon",
    "dp_clip": "learning.dp_clip",
    "dp_delta": "learning.dp_delta",
    "delay_min": "sim.delay_min",
    "delay_max": "sim.delay_max",
    "drop": "sim.drop",
}


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """Defaults ← preset ← config file ← flags, then validation."""
    cfg = RunConfig()
    if getattr(args, "preset", None):
        cfg = cfg.replace(**PRESETS[args.preset])
    if getattr(args, "config_json", None):
        cfg = _from_json(Path(args.config_json))
    if getattr(args, "config", None):
        cfg = load_toml(args.config, cfg)
    changes: dict[str, Any] = {}
    for flag, fieldname in _FLAG_FIELDS.items():
        value = getattr(args, flag, None)
        if value is not None:
            changes[fieldname] = value
    if getattr(args, "no_delta", False):
        changes["wire.delta"] = False
    if getattr(args, "float16", False):
        changes["wire.float16"] = True
    if getattr(args, "mia", False):
        changes["attack.mia"] = True
    if getattr(args, "share_less", False):
        changes["learning.share_less"] = True
    if changes.get("sim.delay_min") is not None and "sim.delay_max" not in changes:
        changes["sim.delay_max"] = max(changes["sim.delay_min"], cfg.sim.delay_max)
    return cfg.replace(**changes).validate()


def _from_json(path: Path) -> RunConfig:
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return from_mapping(raw, RunConfig(), source=str(path))


Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name and help, how it declares its flags, and what it runs."""

    name: str
    help: str
    flags: Callable[[argparse.ArgumentParser], None]
    handle: Handler


def _run_flags(run: argparse.ArgumentParser) -> None:
    experiment_flags(run, real=True)
    run.add_argument("--listen", default="127.0.0.1:7070", help="HOST:PORT to serve on")
    run.add_argument("--peers", default="", help="HOST:PORT,... of other processes (seeds)")
    run.add_argument("--users", help="node ids hosted here, e.g. 0-99 (default: all --nodes)")
    run.add_argument("--server", action="store_true", help="also host the FedAvg server node")
    run.add_argument("--config-json", help=argparse.SUPPRESS)
    run.add_argument(
        "--cluster-key-file", type=Path, help="keyring file (p2pnode keys new); else $P2PNODE_CLUSTER_KEY"
    )
    run.add_argument("--tls-cert", type=Path, help="mutual TLS: this process's certificate (PEM)")
    run.add_argument("--tls-key", type=Path, help="mutual TLS: its private key (PEM)")
    run.add_argument("--tls-ca", type=Path, help="mutual TLS: the cluster CA certificate (PEM)")
    run.add_argument("--state-dir", type=Path, help="checkpoint the nodes here and resume from here")
    run.add_argument("--checkpoint-every", type=int, default=10, help="rounds between checkpoints (10)")


def _simulate_flags(simulate: argparse.ArgumentParser) -> None:
    experiment_flags(simulate, real=False)


def _keys_flags(keys: argparse.ArgumentParser) -> None:
    keys.add_argument("action", choices=["new", "install", "use", "remove", "show"])
    keys.add_argument("file", type=Path, help="the key file")
    keys.add_argument("key_id", nargs="?", help="key id (install, use, remove; new: default k1)")
    keys.add_argument("--cluster", default="default", help="new: the cluster label")


def _data_flags(data: argparse.ArgumentParser) -> None:
    data_sub = data.add_subparsers(dest="data_command", required=True, parser_class=Parser)
    get = data_sub.add_parser("get", help="make a dataset available offline")
    get.add_argument("name", choices=["ml-100k"])
    get.add_argument("--data-dir", help="target directory (default $P2PNODE_DATA or ~/.cache)")
    get.add_argument("--wheel", type=Path, help="use this recbole wheel instead of downloading")


def build_parser(commands: Sequence[Command] | None = None) -> argparse.ArgumentParser:
    """The parser of ``commands`` (default: the daemon's); each subparser knows its handler."""
    commands = DAEMON_COMMANDS if commands is None else commands
    names = {c.name for c in commands}
    epilog = None
    if not names >= {"launch", "experiment"}:
        epilog = "The lab's commands (launch, metrics, experiment, deploy): `p2pnode` or `python -m p2plab`."
    parser = Parser(prog="p2pnode", description="Gossip-learning node daemon and privacy lab.", epilog=epilog)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in commands:
        p = sub.add_parser(command.name, help=command.help)
        command.flags(p)
        p.set_defaults(handler=command.handle)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("p2pnode")
    except PackageNotFoundError:
        return "unknown"


def main(argv: Sequence[str] | None = None, commands: Sequence[Command] | None = None) -> int:
    parser = build_parser(commands)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        handler: Handler = args.handler
        return handler(args)
    except (ConfigError, DataError, ValueError) as exc:
        print(f"p2pnode: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("p2pnode: interrupted", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        print(f"p2pnode: error: {exc}", file=sys.stderr)
        return 1


def progress_printer(args: argparse.Namespace) -> Any:
    if getattr(args, "quiet", False):
        return None
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout

    def out(line: str) -> None:
        print(line, file=stream, flush=True)

    return out


def _tls(args: argparse.Namespace) -> Any:
    from p2pnode.tls import TlsFiles

    given = [args.tls_cert, args.tls_key, args.tls_ca]
    if not any(given):
        return None
    if not all(given):
        raise ConfigError("mutual TLS needs all of --tls-cert, --tls-key and --tls-ca")
    return TlsFiles(args.tls_cert, args.tls_key, args.tls_ca).check()


def _keys(args: argparse.Namespace) -> int:
    """Keyring rotation as memberlist does it: install everywhere, use everywhere, remove."""
    from p2pnode.auth import Keyring, load_keyring, save_keyring

    path: Path = args.file
    if args.action == "new":
        if path.exists():
            raise ConfigError(f"{path} exists; not overwriting a keyring")
        ring = Keyring.generate(args.cluster, args.key_id or "k1")
    else:
        ring = load_keyring(path)
        if args.action != "show" and not args.key_id:
            raise ConfigError(f"keys {args.action} needs a key id")
        if args.action == "install":
            ring = ring.install(args.key_id)
        elif args.action == "use":
            ring = ring.use(args.key_id)
        elif args.action == "remove":
            ring = ring.remove(args.key_id)
    if args.action != "show":
        save_keyring(path, ring)
    ids = ", ".join(f"{k}{' (signs)' if k == ring.primary else ''}" for k in ring.keys)
    print(f"{path}: cluster {ring.cluster!r}, keys {ids}")
    return 0


def _data(args: argparse.Namespace) -> int:
    from p2pnode.datasets import fetch_ml100k

    path = fetch_ml100k(args.data_dir, args.wheel)
    print(f"ml-100k is ready in {path}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from p2pnode.process import tune_process
    from p2pnode.report import metric_for, summary
    from p2pnode.sim import simulate

    tune_process()
    config = config_from_args(args)
    progress = progress_printer(args)
    result = simulate(config, progress)
    if progress is not None:
        progress(summary(result, metric_for(config)))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "result.json").write_text(json.dumps(result, indent=1))
    print_result(args, config, result)
    return 0


def _run(args: argparse.Namespace) -> int:
    from p2pnode.process import tune_process
    from p2pnode.real import ProcessSpec, parse_hostport, parse_users, run_process

    tune_process()
    config = config_from_args(args)
    host, port = parse_hostport(args.listen)
    users = parse_users(args.users) if args.users else tuple(range(config.nodes))
    peers = tuple(p for p in (x.strip() for x in args.peers.split(",")) if p)
    for peer in peers:
        parse_hostport(peer)
    if args.checkpoint_every < 1:
        raise ConfigError("--checkpoint-every must be at least 1")
    spec = ProcessSpec(
        users,
        host,
        port,
        peers,
        args.out,
        server=args.server,
        key_file=args.cluster_key_file,
        state_dir=args.state_dir,
        checkpoint_every=args.checkpoint_every,
        tls=_tls(args),
    )
    result = run_async(run_process(config, spec, progress_printer(args)))
    print_result(args, config, result)
    return 0


def print_result(args: argparse.Namespace, config: RunConfig, result: dict[str, Any]) -> None:
    """``--json``: the run's summary as one JSON object, with its per-round utility."""
    if not args.json:
        return
    from p2pnode.report import metric_for

    printable = {k: v for k, v in result.items() if k != "history"}
    printable["per_round"] = [
        {k: h[k] for k in ("round", metric_for(config).key, "messages", "bytes", "dp_epsilon") if k in h}
        for h in result.get("history", [])
    ]
    print(json.dumps(printable))


def run_async(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


DAEMON_COMMANDS: tuple[Command, ...] = (
    Command("run", "run the nodes of one process until stopped", _run_flags, _run),
    Command("simulate", "the same experiment on the virtual clock", _simulate_flags, _simulate),
    Command("keys", "cluster keyring: new, install, use, remove, show", _keys_flags, _keys),
    Command("data", "datasets", _data_flags, _data),
)
