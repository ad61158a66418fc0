"""Flower's ClientApp for every fedkd run (``fedkd_core.flower`` is the server side and the command).

Each step that trains (``train.update``, ``train.finish``) loads the client's state from
``context.state``, runs ``experiment.client_step`` on a per-process replica of the algorithm
(built from the run's config, which travels in every message, so the one module-level ``clientapp``
serves any run, in simulation and on real nodes), and keeps the new state in ``context.state``.
The queries answer from the node alone: its client's id (``query.whoami``, from the node's
``partition-id``) and the state it keeps for a run (``query.state``, sent back as it was stored).

This module imports torch and the algorithms only inside a step that trains. Flower's deployment
engine starts a ClientApp process for every message a SuperNode receives, and the queries need
neither: a process that answers one starts in about 1 s instead of 3.5 s (2-core Xeon, Emerald
Rapids), two of the three processes a client costs each round.
"""

from __future__ import annotations

import functools
import json

try:
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
    from flwr.clientapp import ClientApp
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError("fedkd_core.flower needs Flower: pip install -e '.[flower]'") from error

DIVERGED = "diverged"  # the key of a client's reply whose training became non-finite (its error's text)


# --- messages ------------------------------------------------------------------------------------

def to_record(message: dict, round_index: int, run: int, config: str = "") -> RecordDict:
    """A fedkd message (name -> tensor), the round, the run (which of the ServerApp's configs)
    and that run's config (JSON, see ``fedkd_core.flower.config_json``) as a Flower RecordDict;
    bfloat16 tensors are widened to float32 (Flower's arrays have no bfloat16)."""
    import torch

    arrays = {name: t.detach().cpu().float() if t.dtype == torch.bfloat16 else t.detach().cpu()
              for name, t in message.items()}
    return RecordDict({"m": ArrayRecord(torch_state_dict=arrays), "cfg": header(round_index, run, config)})


def header(round_index: int, run: int, config: str = "") -> ConfigRecord:
    """A message's ``cfg``: the round, the run and that run's config (JSON; "" in a client's reply)."""
    return ConfigRecord({"round": round_index, "run": run, "config": config})


def from_record(record: RecordDict) -> dict:
    return dict(record["m"].to_torch_state_dict()) if "m" in record else {}


# --- the client side -----------------------------------------------------------------------------

@functools.lru_cache(maxsize=2)
def _replica(config_text: str):
    """This process's copy of the run's algorithm (same data split and initial model as the
    server's); it serves every client that lands on this process and keeps none of their states."""
    import torch

    from .algorithms import Context as AlgorithmContext, algorithm_class, algorithm_config
    from .experiment import config_from_dict, default_device
    from .federation import build_federated_data
    from .results import config_hash

    sent = json.loads(config_text)
    config = config_from_dict(sent["config"])
    if config_hash(config) != sent["key"]:
        raise RuntimeError("the client rebuilt a different config than the server's (fedkd_core versions differ?)")
    torch.set_num_threads(1)
    data = build_federated_data(config.data, config.seed)
    ctx = AlgorithmContext(data=data, model_name=config.model, train=config.train, device=default_device(),
                           seed=config.seed)
    return algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)


def _client_id(context: Context) -> int:
    return int(context.node_config["partition-id"])


def _state_key(run: int) -> str:
    return f"fedkd-run{run}"


def _run_client_step(phase: str, message: Message, context: Context) -> Message:
    from .experiment import DivergedError, client_step
    from .training import NonFiniteLoss

    client, cfg = _client_id(context), message.content["cfg"]
    round_index, run = int(cfg["round"]), int(cfg["run"])
    key = _state_key(run)
    saved = dict(context.state[key].to_torch_state_dict()) if key in context.state else {}
    try:
        output, new_state = client_step(_replica(str(cfg["config"])), round_index, client, phase,
                                        from_record(message.content), saved)
    except (NonFiniteLoss, DivergedError) as error:  # a result of the run: the server stops it as RunDiverged
        return Message(RecordDict({"cfg": ConfigRecord({"round": round_index, "run": run, DIVERGED: str(error)})}),
                       reply_to=message)
    context.state[key] = ArrayRecord(torch_state_dict={k: v.cpu() for k, v in new_state.items()})
    return Message(to_record(output or {}, round_index, run), reply_to=message)


clientapp = ClientApp()
"""The ClientApp of every run: the update and finish steps, the client's id and its state (kept
in ``context.state``, one entry per run of the ServerApp)."""


@clientapp.train("update")
def _update(message: Message, context: Context) -> Message:
    return _run_client_step("update", message, context)


@clientapp.train("finish")
def _finish(message: Message, context: Context) -> Message:
    return _run_client_step("finish", message, context)


@clientapp.query("whoami")
def _whoami(message: Message, context: Context) -> Message:
    return Message(RecordDict({"cfg": ConfigRecord({"client": _client_id(context)})}), reply_to=message)


@clientapp.query("state")
def _state(message: Message, context: Context) -> Message:
    """The state this node keeps for the run, as stored (no state: no arrays), without torch."""
    run = int(message.content["cfg"]["run"])
    content = {"cfg": header(0, run)}
    if _state_key(run) in context.state:
        content["m"] = context.state[_state_key(run)]
    return Message(RecordDict(content), reply_to=message)
