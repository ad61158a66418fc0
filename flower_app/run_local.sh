#!/usr/bin/env bash
# Flower's deployment engine on this machine, as on real nodes: one SuperLink, one SuperNode per
# client (client k is the SuperNode started with partition-id=k), then `flwr run` of this app with
# the given config. The record lands where a local run's does (FEDKD_RESULTS or results/),
# marked `flower (deployment, N SuperNodes)`. Everything started here is stopped at the end.
#
#   PATH=$PWD/.venv/bin:$PATH flower_app/run_local.sh CONFIG.yaml [PORT] [PROFILE]
#
# On real machines run the same three commands there (without --insecure, with TLS certificates,
# and the SuperLink's address instead of 127.0.0.1); see flower_app/README.md.
set -euo pipefail
config=$(realpath "$1"); port=${2:-8000}; profile=${3:-deployment}
app=$(dirname "$(realpath "$0")")
export FLWR_HOME; FLWR_HOME=$(mktemp -d)   # Flower's own folder (connections, installed apps), thrown away
logs=$FLWR_HOME/logs; mkdir -p "$logs"
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$FLWR_HOME"' EXIT

flower-superlink --insecure --port "$port" --disable-runtime-dependency-installation > "$logs/superlink.log" 2>&1 &
# Read the config while the SuperLink starts (both import for seconds); a bad config still stops here.
clients=$(python -c "from fedkd_core.flower import load_config; print(load_config('$config').data.num_clients)")
python - "$port" <<'PY'
import socket, sys, time
for _ in range(300):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close(); break
    except OSError:
        time.sleep(0.2)
else:
    sys.exit("error: the SuperLink did not start; see its log")
PY
for k in $(seq 0 $((clients - 1))); do
    flower-supernode --insecure --superlink "127.0.0.1:$port" --port $((port + 1 + k)) \
        --node-config "partition-id=$k num-partitions=$clients" > "$logs/supernode$k.log" 2>&1 &
done
cat > "$FLWR_HOME/config.toml" <<TOML
[superlink]
default = "here"

[superlink.here]
address = "127.0.0.1:$port"
insecure = true
TOML
echo "flower: SuperLink on 127.0.0.1:$port, $clients SuperNodes; logs in $logs"
flwr run "$app" here --run-config "configs='$config' profile='$profile'" --stream 2>&1 | tee "$logs/run.log"
grep -q "; record " "$logs/run.log" || { echo "error: the run wrote no record; the SuperLink's log:"; tail -n 40 "$logs/superlink.log"; exit 1; }
