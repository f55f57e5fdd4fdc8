"""The daemon's command line (``python -m p2pnode``): run, simulate, keys, data.

It only maps flags onto ``RunConfig`` and calls the runners. The lab (``p2plab.cli``) builds the
full ``p2pnode`` command from these commands and its own (launch, metrics, experiment, deploy);
``experiment_flags``, ``config_from_args`` and ``print_result`` are what it shares.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from learning.interactions import DataError
from learning.synthetic import POI_SHAPES
from p2pcore.plugin import PluginError
from p2pnode.config import (
    OFF_AT_ZERO,
    PRESETS,
    ConfigError,
    Flag,
    RunConfig,
    changes_from_mapping,
    config_fields,
    defaults,
    from_mapping,
    get_path,
    load_toml,
    nested,
    read_toml,
    to_toml,
)
from p2pnode.data import atomic


class Parser(argparse.ArgumentParser):
    """Bad flags give one clear line on stderr, not a usage dump or a traceback."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


#: the help sections of the configuration flags, in the order they are listed
GROUPS = {
    "experiment": "experiment",
    "learning": "learning",
    "dp": "DP-SGD (local, per node; example-level DP)",
    "attack": "attack (CIA paper §IV)",
    "wire": "wire",
    "sim": "simulated network",
    "churn": "churn (simulate: user nodes; launch: processes; p2pcore/churn.py)",
    "aia": "attribute inference (--attack aia; paper 004 §II-B, adversary/aia.py)",
    "knn": "peer-to-peer KNN service (--knn; paper 003, protocols/knn.py)",
}


def finite(text: str) -> float:
    """A float flag's value: a number, and finite (no setting means inf or nan)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


_TYPES: dict[str, Any] = {"int": int, "float": finite, "str": str}


#: the flags a newcomer reaches for first, listed in their own section at the top of ``--help``
COMMON = (
    "--nodes",
    "--rounds",
    "--protocol",
    "--sampling",
    "--model",
    "--dataset",
    "--lr",
    "--seed",
    "--attack",
    "--colluders",
    "--mia",
    "--share-less",
    "--dp-epsilon",
    "--defence",
    "--knn",
)
#: a process's own settings among them (``run``: which users, where it listens, its peers)
COMMON_PROCESS = ("--users", "--listen", "--peers", "--processes")
COMMON_TITLE = "common flags (every other flag follows, by topic)"


def experiment_flags(p: argparse.ArgumentParser, real: bool, network: bool = False) -> None:
    """The flags of a run: the common ones first (:data:`COMMON`, ``--config``, ``--preset``,
    ``--out``, ``--json``, ``--quiet``), then one flag per configuration field that declares one
    (p2pnode/config.py), by topic."""
    common = p.add_argument_group(COMMON_TITLE)
    groups = {key: p.add_argument_group(title) for key, title in GROUPS.items()}
    start = defaults(daemon=real)
    for path, f in config_fields():
        flag: Flag | None = f.metadata.get("flag")
        if flag is None or not flag.offered(real, network):
            continue
        group = common if flag.flag_name(f.name) in COMMON else groups[flag.group]
        _field_flag(group, path, f, start.get(path), _dest(path))
    config_and_preset_flags(common)
    output_flags(p, group=common)


def config_and_preset_flags(g: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--config`` and ``--preset``, as every command that builds a configuration has them."""
    g.add_argument(
        "--config",
        type=Path,
        help="TOML file with RunConfig fields, and a process's [process] and [limits] tables "
        "(flags override it)",
    )
    g.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="named starting configuration: "
        + "; ".join(f"{k} = {_preset_text(v)}" for k, v in sorted(PRESETS.items())),
    )


def output_flags(
    p: argparse.ArgumentParser, json: bool = True, group: argparse._ArgumentGroup | None = None
) -> None:
    """``--out``, ``--json`` and ``--quiet``, as every command that runs something has them (in
    ``group``, or a section of their own)."""
    o = group if group is not None else p.add_argument_group("output")
    out_flag(o)
    if json:
        o.add_argument("--json", action="store_true", help="print one final JSON object")
    o.add_argument("--quiet", action="store_true", help="no progress lines: the final summary only")


def out_folder(text: str) -> Path:
    """``--out``'s value: a folder, new or existing; a file of that name is refused at once (it
    used to end the run, after its rounds, with a traceback)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder: give a folder for the results")
    if any(p.exists() and not p.is_dir() for p in path.parents):
        raise argparse.ArgumentTypeError(f"{text}: a part of the path is a file, not a folder")
    return path


def out_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--out``: where a command writes what it makes."""
    p.add_argument(
        "--out",
        type=out_folder,
        help="directory for result files (experiment run: default results/NAME; deploy: the "
        "controller's work folder, default deploy-runs/CLUSTER)",
    )


def config_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup, path: str, shown: bool = True) -> None:
    """The flag of one run field (``nodes``, ``min_interactions``), as its declaration gives it,
    for a command that takes only a few (``experiment run``, ``data describe``); its value is
    read back with :func:`given_config`. ``shown``: its help gives the run's default."""
    f = dict(config_fields())[path]
    _field_flag(p, path, f, RunConfig().get(path) if shown else None, _dest(path))


def given_config(args: argparse.Namespace) -> dict[str, Any]:
    """The run fields given as flags, by dotted path (a switch as the value it sets)."""
    changes: dict[str, Any] = {}
    for path, f in config_fields():
        value = getattr(args, _dest(path), None)
        if value is not None:
            flag: Flag = f.metadata["flag"]
            changes[path] = flag.switch if flag.switch is not None else value
    return changes


def settings_flags(p: argparse.ArgumentParser, command: str) -> None:
    """The process settings ``command`` offers (p2pnode/runners/settings.py), in their help sections."""
    from p2pnode.runners.settings import ProcessConfig, offered

    defaults = ProcessConfig()
    titles = {"process": "process", "limits": "load limits (per process; p2pnode/trust/limits.py)"}
    groups: dict[str, argparse._ArgumentGroup] = {}
    common = next((g for g in p._action_groups if g.title == COMMON_TITLE), None)
    for path, f in offered(command):
        flag: Flag = f.metadata["flag"]
        if common is not None and flag.flag_name(f.name) in COMMON_PROCESS:
            _field_flag(common, path, f, get_path(defaults, path), _setting_dest(path))
            continue
        if flag.group not in groups:
            groups[flag.group] = p.add_argument_group(titles[flag.group])
        _field_flag(groups[flag.group], path, f, get_path(defaults, path), _setting_dest(path))


def settings_from_args(args: argparse.Namespace, command: str) -> Any:
    """The ``ProcessConfig`` of ``command``: defaults ← the ``--config`` file's ``[process]`` and
    ``[limits]`` tables ← flags."""
    from p2pnode.runners.settings import offered, settings_from

    table: dict[str, Any] | None = None
    config_file = getattr(args, "config", None)
    if config_file:
        raw = read_toml(config_file)
        table = dict(raw.get("process", {}))
        if "limits" in raw:
            if "limits" in table:
                raise ConfigError(f"{config_file}: give the limits in [limits] or [process.limits], not both")
            table["limits"] = raw["limits"]
    flags: dict[str, Any] = {}
    for path, f in offered(command):
        value = getattr(args, _setting_dest(path), None)
        if value is not None:
            flag: Flag = f.metadata["flag"]
            flags[path] = flag.switch if flag.switch is not None else value
    return settings_from(command, table, flags, str(config_file or "config"))


def _field_flag(
    group: argparse.ArgumentParser | argparse._ArgumentGroup,
    path: str,
    f: dataclasses.Field[Any],
    default: Any,
    dest: str,
) -> None:
    """The one flag of a field that declares one (``Flag``): its name, help, type and choices."""
    flag: Flag = f.metadata["flag"]
    kw: dict[str, Any] = {"dest": dest, "default": None}
    if flag.switch is not None:
        kw.update(action="store_true", help=flag.help)
    else:
        shown = f" (default: {default})" if default not in ("", None) else ""
        metavar = flag.metavar or flag.flag_name(f.name)[2:].upper().replace("-", "_")
        kw.update(type=_TYPES[str(f.type)], help=flag.help + shown, metavar=metavar)
        if flag.choices:
            kw.update(choices=flag.choices, metavar=None)
        if flag.const is not None:
            kw.update(nargs="?", const=flag.const)
    group.add_argument(flag.flag_name(f.name), **kw)


def _setting_dest(path: str) -> str:
    return "set__" + path.replace(".", "__")


def _dest(path: str) -> str:
    return "cfg__" + path.replace(".", "__")


def _preset_text(changes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in changes.items()) or "the defaults (the paper's setting)"


def config_from_args(
    args: argparse.Namespace, keys: Mapping[str, Any] | None = None, daemon: bool = False
) -> RunConfig:
    """Defaults ← preset ← config file ← ``keys`` ← flags, then validation (once, in
    ``RunConfig``). ``keys``: dotted configuration keys (``{"learning.lr": 0.05}``), as the
    Python API (``p2pnode.simulate``) takes them for the fields that have no flag. ``daemon``:
    the defaults are the daemon's safe ones (``run``, ``launch``; p2pnode/config.py ``SAFE``)."""
    cfg = defaults(daemon)
    if getattr(args, "preset", None):
        cfg = cfg.replace(**PRESETS[args.preset])
    if getattr(args, "config_json", None):
        cfg = _from_json(Path(args.config_json))
    if getattr(args, "config", None):
        cfg = load_toml(args.config, cfg)
    changes: dict[str, Any] = {}
    if keys:
        changes.update(changes_from_mapping(nested(keys), cfg, source="keyword arguments"))
    flags = given_config(args)
    changes.update(flags)
    given = [(f.name, f.metadata["flag"]) for path, f in config_fields() if path in flags]
    if changes.get("sim.delay_min") is not None and "sim.delay_max" not in changes:
        changes["sim.delay_max"] = max(changes["sim.delay_min"], cfg.sim.delay_max)
    cfg = cfg.replace(**changes).validate_fields()
    if "dataset" in changes and "nodes" not in changes and cfg.nodes == RunConfig().nodes:
        from p2pnode.nodes.prepare import nodes_of_dataset

        cfg = nodes_of_dataset(cfg)  # before the rules that depend on nodes (colluders, target-k)
    cfg = cfg.validate()
    for name, flag in given:  # a flag that would change nothing is a mistake: say which one is missing
        if name in OFF_AT_ZERO and getattr(cfg.learning, name) == 0:
            raise ConfigError(
                f"{flag.flag_name(name)} 0 means no DP-SGD: leave the flag out for a run without DP "
                "(a DP run needs a value > 0)"
            )
        if flag.needs is not None and not flag.needs[0](cfg):
            raise ConfigError(f"{flag.flag_name(name)} has no effect without {flag.needs[1]}")
    return cfg


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
    settings_flags(run, "run")
    run.add_argument("--config-json", help=argparse.SUPPRESS)


def _simulate_flags(simulate: argparse.ArgumentParser) -> None:
    experiment_flags(simulate, real=False)
    settings_flags(simulate, "simulate")


def _keys_flags(keys: argparse.ArgumentParser) -> None:
    keys.add_argument(
        "action",
        choices=["new", "install", "use", "remove", "show", "authority", "issue", "trust", "revoke"],
        help="keyring: new, install, use, remove, show; identities: authority (make the cluster "
        "authority), issue (a process's key and credential), trust (a keyring requires the "
        "authority's credentials), revoke (a keyring refuses a credential by serial)",
    )
    keys.add_argument("file", type=Path, help="the keyring (authority, issue: the authority file)")
    keys.add_argument(
        "key_id",
        nargs="?",
        help="install, use, remove: key id (new: default k1); issue: the identity file to write; "
        "trust: the authority file; revoke: the credential's serial",
    )
    keys.add_argument("--cluster", default="default", help="new, authority: the cluster label")
    settings_flags(keys, "keys")  # issue: --users, the node ids the process may host
    keys.add_argument("--keyring", type=Path, help="authority: also make this keyring trust it")


def _data_flags(data: argparse.ArgumentParser) -> None:
    data_sub = data.add_subparsers(dest="data_command", required=True, parser_class=Parser)
    data_sub.add_parser("list", help="the CIA paper's three data sets: where to get each, how to run it")
    get = data_sub.add_parser("get", help="make a dataset available offline (the others: where to get them)")
    get.add_argument("name", choices=["ml-100k", "foursquare-nyc", "gowalla-nyc"])
    config_flag(get, "data_dir")
    get.add_argument("--wheel", type=Path, help="use this recbole wheel instead of downloading")
    describe = data_sub.add_parser(
        "describe", help="what --dataset FILE gives: format, and what each step leaves"
    )
    describe.add_argument("file", type=Path)
    for path in ("columns", "sep", "bbox", "min_interactions", "min_item_users"):
        config_flag(describe, path)  # as run and simulate have them
    synth = data_sub.add_parser(
        "synth", help="write a synthetic check-in file of a POI data set's shape (not the real data)"
    )
    synth.add_argument("shape", choices=sorted(POI_SHAPES))
    synth.add_argument("out", type=Path, help="the file to write")
    synth.add_argument("--format", choices=["tsmc2014", "snap", "csv"], default="tsmc2014")
    config_flag(synth, "seed")
    synth.add_argument("--users", type=int, help="fewer users (check-ins and venues scale with them)")
    synth.add_argument(
        "--venues", type=int, help="this many venues (e.g. the full catalogue for fewer users)"
    )
    synth.add_argument(
        "--elsewhere", type=float, default=0.0, help="share of added check-ins in other cities (a world file)"
    )


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
        _short_usage(p)
        p.set_defaults(handler=command.handle)
    return parser


def _short_usage(p: argparse.ArgumentParser, most: int = 6) -> None:
    """A usage line for a command of many flags: its positionals and ``[flags]`` (argparse's own
    lists every flag, ~80 lines for ``simulate``, before the help gets to any of them)."""
    if len(p.format_usage().splitlines()) <= most:
        return
    positionals = [a.metavar or a.dest for a in p._actions if not a.option_strings]
    p.usage = " ".join(["%(prog)s", "[flags]", *(str(x) for x in positionals)]) + (
        "   (the common flags come first below)"
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("p2pnode")
    except PackageNotFoundError:
        return "unknown"


LAB_COMMANDS = ("launch", "metrics", "experiment", "deploy")


def main(argv: Sequence[str] | None = None, commands: Sequence[Command] | None = None) -> int:
    parser = build_parser(commands)
    words = list(sys.argv[1:] if argv is None else argv)
    names = {c.name for c in (DAEMON_COMMANDS if commands is None else commands)}
    lab = next((w for w in words if not w.startswith("-")), None)
    if lab in LAB_COMMANDS and lab not in names:  # `python -m p2pnode launch`: the daemon alone
        print(
            f"p2pnode: '{lab}' is a lab command, not the daemon's: run `p2pnode {lab} ...` "
            f"(or `python -m p2plab {lab} ...`)",
            file=sys.stderr,
        )
        return 2
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # a bad flag (said in one line) or --help: its status, returned
        return exc.code if isinstance(exc.code, int) else 2
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
    except asyncio.CancelledError:  # SIGTERM to a launch (p2plab.launch): its processes are stopped
        print("p2pnode: terminated", file=sys.stderr)
        return 143
    except PluginError as exc:  # the user's own code: its traceback is theirs to read
        import traceback

        cause = exc.__cause__
        if cause is not None:
            print("".join(traceback.format_exception(cause)), end="", file=sys.stderr)
        print(f"p2pnode: error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # a process that could not start says whether it was the user's mistake
        print(f"p2pnode: error: {exc}", file=sys.stderr)
        status = getattr(exc, "exit_status", 1)
        return status if isinstance(status, int) else 1


def progress_printer(args: argparse.Namespace) -> Any:
    if getattr(args, "quiet", False):
        return None
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout

    def out(line: str) -> None:
        print(line, file=stream, flush=True)

    return out


def _tls(settings: Any) -> Any:
    from p2pnode.trust.tls import TlsFiles

    given = [settings.tls_cert, settings.tls_key, settings.tls_ca]
    if not any(given):
        return None
    if not all(given):
        raise ConfigError("mutual TLS needs all of --tls-cert, --tls-key and --tls-ca")
    return TlsFiles(*(Path(g) for g in given)).check()


def _keys(args: argparse.Namespace) -> int:
    """Keyring rotation as memberlist does it (install everywhere, use everywhere, remove), and
    the process identities of p2pnode.trust.identity (authority, issue, trust, revoke)."""
    from p2pnode.trust.auth import Keyring, load_keyring, save_keyring

    path: Path = args.file
    if args.action in ("authority", "issue"):
        return _identity_keys(args)
    if args.action == "new":
        if path.exists():
            raise ConfigError(f"{path} exists; not overwriting a keyring")
        ring = Keyring.generate(args.cluster, args.key_id or "k1")
    else:
        ring = load_keyring(path)
        if args.action != "show" and not args.key_id:
            needs = {"trust": "an authority file", "revoke": "a credential serial"}
            what = needs.get(args.action, "a key id")
            raise ConfigError(f"keys {args.action} needs {what}")
        if args.action == "install":
            ring = ring.install(args.key_id)
        elif args.action == "use":
            ring = ring.use(args.key_id)
        elif args.action == "remove":
            ring = ring.remove(args.key_id)
        elif args.action == "trust":
            ring = _trust(ring, Path(args.key_id))
        elif args.action == "revoke":
            if not args.key_id.isdigit():
                raise ConfigError(f"keys revoke: {args.key_id!r} is not a serial number")
            ring = ring.revoke(int(args.key_id))
    if args.action != "show":
        save_keyring(path, ring)
    ids = ", ".join(f"{k}{' (signs)' if k == ring.primary else ''}" for k in ring.keys)
    print(f"{path}: cluster {ring.cluster!r}, keys {ids}")
    if ring.authorities:
        print(f"  requires identities from authority {', '.join(a.hex()[:16] for a in ring.authorities)}")
    if ring.revoked:
        print(f"  revoked serials: {', '.join(str(r) for r in sorted(ring.revoked))}")
    return 0


def _trust(ring: Any, authority_file: Path) -> Any:
    from p2pnode.trust.identity import load_authority

    authority = load_authority(authority_file)
    if authority.cluster != ring.cluster:
        raise ConfigError(
            f"{authority_file} is for cluster {authority.cluster!r}, the keyring for {ring.cluster!r}"
        )
    return ring.trust(authority.public_key)


def _identity_keys(args: argparse.Namespace) -> int:
    """``keys authority AUTH``: the cluster authority (``--keyring``: and trust it there);
    ``keys issue AUTH OUT --users``: a process's key and the authority's credential for it."""
    from p2pnode.trust.auth import Keyring, load_keyring, save_keyring
    from p2pnode.trust.identity import Authority, load_authority, parse_ranges, save_authority, save_identity

    path: Path = args.file
    if args.action == "authority":
        if path.exists():
            raise ConfigError(f"{path} exists; not overwriting an authority")
        authority = Authority.generate(args.cluster)
        save_authority(path, authority)
        print(f"{path}: authority of cluster {authority.cluster!r}, public key {authority.public_key.hex()}")
        if args.keyring is not None:
            ring = load_keyring(args.keyring) if args.keyring.exists() else Keyring.generate(args.cluster)
            save_keyring(args.keyring, _trust(ring, path))
            print(f"{args.keyring}: requires identities from this authority")
        return 0
    users = settings_from_args(args, "keys").users
    if not args.key_id or not users:
        raise ConfigError("keys issue AUTHORITY OUT --users IDS")
    out = Path(args.key_id)
    if out.exists():
        raise ConfigError(f"{out} exists; not overwriting an identity")
    ranges = parse_ranges(users)
    authority = load_authority(path)
    identity = authority.issue(ranges)
    save_authority(path, authority)  # the next serial
    save_identity(out, identity)
    cred = identity.credential
    print(f"{out}: serial {cred.serial}, cluster {cred.cluster!r}, nodes {users}")
    return 0


def _data(args: argparse.Namespace) -> int:
    from p2pnode.data import datasets

    if args.data_command == "list":
        for src in datasets.SOURCES:
            print(f"{src.name}: {src.users:,} users, {src.items:,} items, {src.interactions}")
            print(f"  get it from {src.where}")
            print(f"  run it with {src.how}")
        return 0
    if args.data_command == "describe":
        options = RunConfig(dataset=str(args.file)).replace(**given_config(args)).validate()
        print("\n".join(datasets.describe(args.file, options.table_options())))
        return 0
    if args.data_command == "synth":
        return _synth(args)
    if args.name != datasets.ML100K:
        src = datasets.source(args.name)
        raise DataError(
            f"{src.name} cannot be downloaded by p2pnode; get it from {src.where}, then run with {src.how}"
        )
    path = datasets.fetch_ml100k(given_config(args).get("data_dir"), args.wheel)
    print(f"ml-100k is ready in {path}")
    return 0


def _synth(args: argparse.Namespace) -> int:
    """``data synth``: a POI-shaped log from learning/synthetic.py in a native format."""
    from learning import synthetic
    from p2pnode.data import datasets

    seed = given_config(args).get("seed", 0)

    cfg = dataclasses.replace(synthetic.POI_SHAPES[args.shape], seed=seed)
    users, venues, checkins = cfg.users, cfg.venues, cfg.checkins
    if args.users:
        if args.users < 2:
            raise ConfigError("--users must be at least 2")
        scale = args.users / cfg.users
        users, venues, checkins = args.users, max(round(cfg.venues * scale), 2), round(cfg.checkins * scale)
    if args.venues:
        if args.venues < 2:
            raise ConfigError("--venues must be at least 2")
        venues = args.venues
    # enough for every venue's first visit (at most half of a user's check-ins) and every user's minimum
    checkins = max(checkins, 2 * venues + users, users * cfg.min_per_user)
    cfg = dataclasses.replace(
        cfg, users=users, venues=venues, checkins=checkins, neighbourhoods=min(cfg.neighbourhoods, venues)
    )
    log = synthetic.poi_checkins(cfg)
    if args.elsewhere:
        log = synthetic.elsewhere(log, args.elsewhere, seed)
    lines = synthetic.POI_FORMATS[args.format](log)
    atomic.write_text(args.out, "".join(lines))
    about = {"shape": args.shape, "seed": seed, "users": cfg.users, "venues": cfg.venues}
    datasets.mark_synthetic(Path(args.out), {**about, "checkins": len(log), "format": args.format})
    print(
        f"{args.out}: {len(log):,} check-ins of {cfg.users:,} users at {cfg.venues:,} venues "
        f"(synthetic, of {args.shape}'s shape), {args.format} format; "
        f"{args.out}{datasets.SYNTHETIC_SUFFIX} says so to the reports of runs on it"
    )
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from p2pnode.runners.process import tune_process
    from p2pnode.runners.report import metric_for, summary
    from p2pnode.runners.sim import simulate

    tune_process()
    config = config_from_args(args)
    settings = settings_from_args(args, "simulate")
    progress = progress_printer(args)
    result = simulate(config, progress, memory_check=settings.memory_check)
    if progress is not None:
        progress(summary(result, metric_for(config)))
    if args.out is not None:
        write_config(args.out, config)
        (args.out / "result.json").write_text(json.dumps(result, indent=1))
    print_result(args, config, result)
    return 0


def write_config(out: Path, config: RunConfig) -> None:
    """``out/config.toml``: the run's whole configuration, which ``--config`` reads back to the
    same configuration (and so the same run key)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "config.toml", to_toml(config))


def _config_flags(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="config_command", required=True, parser_class=Parser)
    show = sub.add_parser("show", help="print the whole configuration tree as commented TOML")
    config_and_preset_flags(show)
    show.add_argument(
        "--daemon", action="store_true", help="the defaults of run, launch and deploy (the clip on)"
    )


def _config(args: argparse.Namespace) -> int:
    cfg = defaults(daemon=args.daemon)
    if args.preset:
        cfg = cfg.replace(**PRESETS[args.preset])
    if args.config:
        cfg = load_toml(args.config, cfg)
    print(to_toml(cfg), end="")
    return 0


def _run(args: argparse.Namespace) -> int:
    from p2pnode.runners.process import tune_process
    from p2pnode.runners.real import ProcessSpec, parse_hostport, parse_users, run_process

    tune_process()
    config = config_from_args(args, daemon=True)
    settings = settings_from_args(args, "run")
    if args.out is not None:
        write_config(args.out, config)
    host, port = parse_hostport(settings.listen)
    users = parse_users(settings.users) if settings.users else tuple(range(config.nodes))
    peers = tuple(p for p in (x.strip() for x in settings.peers.split(",")) if p)
    for peer in peers:
        parse_hostport(peer)
    # a daemon runs until stopped unless --rounds (or a config file or preset) bounds it
    forever = args.cfg__rounds is None and not (args.config or args.config_json or args.preset)
    if forever and config.learning.dp_epsilon:
        raise ConfigError("--dp-epsilon spreads its budget over --rounds: give --rounds (or --dp-noise)")
    if not peers and config.sampling == "cyclon":
        print(
            f"p2pnode: {settings.listen} starts a network (no --peers); "
            f"others join it with --peers {settings.listen}",
            file=sys.stderr,
            flush=True,
        )
    path = settings.path
    spec = ProcessSpec(
        users,
        host,
        port,
        peers,
        args.out,
        server=settings.server,
        key_file=path(settings.cluster_key_file),
        identity_file=path(settings.identity),
        limits=settings.limits,
        state_dir=path(settings.state_dir),
        checkpoint_every=settings.checkpoint_every,
        bootstrap_timeout_s=settings.peer_wait,
        tls=_tls(settings),
        forever=forever,
    )
    result = run_async(run_process(config, spec, progress_printer(args)))
    print_result(args, config, result)
    return 0


def print_result(args: argparse.Namespace, config: RunConfig, result: dict[str, Any]) -> None:
    """``--json``: the run's summary as one JSON object, with its per-round utility; ``--quiet``
    alone: the summary line (the runners print it after their progress lines otherwise)."""
    from p2pnode.runners.report import metric_for, summary

    if not args.json:
        if getattr(args, "quiet", False):
            print(summary(result, metric_for(config)), flush=True)
        return

    # per node: result.json (--out) and the Python API have the table; one summary line here
    printable = {k: v for k, v in result.items() if k not in ("history", "per_node")}
    metric = metric_for(config)
    columns = (
        "round",
        metric.key,
        metric.ndcg_key,
        metric.recall_key,
        "mrr",
        f"{metric.key}_random",
        f"{metric.key}_popularity",
    )
    printable["history"] = [  # the name result.json and the Python result use; its main columns
        {k: h[k] for k in (*columns, "validation", "messages", "bytes", "dp_epsilon", "churn") if k in h}
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
    Command(
        "config",
        "the configuration tree: show (as commented TOML, to edit for --config)",
        _config_flags,
        _config,
    ),
)
