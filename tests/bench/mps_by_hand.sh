# SPDX-License-Identifier: BSD-3-Clause
# MPS started and stopped by hand, as NVIDIA documents it, for the
# benchmarks' reference configurations (sourced; needs $control).
#   mps_hand_up DIR     nvidia-cuda-mps-control -d with private dirs in DIR,
#                       returns once its control socket exists
#   mps_hand_down DIR   quit, then wait until the daemon is gone (no process,
#                       or a zombie: the -d daemon's parent may not reap it)
#   mps_hand_serve DIR  its server started now (start_server), as a user
#                       who keeps one up has it: no client pays its start
#   mps_hand_up_all DIR N / mps_hand_down_all DIR N
#                       one daemon per GPU 0..N-1, in DIR0 .. DIR<N-1>
mps_hand_up() {
    mkdir -p "$1/p" "$1/l"
    CUDA_MPS_PIPE_DIRECTORY=$1/p CUDA_MPS_LOG_DIRECTORY=$1/l "$control" -d
    while [ ! -S "$1/p/control" ]; do sleep 0.001; done
}
mps_hand_serve() {
    echo "start_server -uid $(id -u)" | CUDA_MPS_PIPE_DIRECTORY=$1/p "$control" >/dev/null
}
mps_hand_down() {
    local pid
    pid=$(cat "$1/p/nvidia-cuda-mps-control.pid" 2>/dev/null)
    echo quit | CUDA_MPS_PIPE_DIRECTORY=$1/p "$control" >/dev/null
    while [ -n "$pid" ] && [ -e "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
        sleep 0.002
    done
    rm -rf "$1"
}
mps_hand_up_all() {
    local g
    for ((g = 0; g < $2; g++)); do
        CUDA_VISIBLE_DEVICES=$g mps_hand_up "$1$g"
    done
}
mps_hand_down_all() {
    local g
    for ((g = 0; g < $2; g++)); do
        mps_hand_down "$1$g"
    done
}
