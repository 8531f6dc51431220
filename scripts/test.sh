#!/usr/bin/env bash
# The one test command (README, .ci/run): sets up a fresh machine, then runs the Rust and Python tests.
# Installs: Debian packages the tests use (when root and missing), the Python package with its test
# extras (builds the Rust engine via maturin), then the linters (ruff, clippy), `cargo test` and `pytest`.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v mkfs.xfs   >/dev/null || need_pkgs+=(xfsprogs)
command -v mkfs.ext4  >/dev/null || need_pkgs+=(e2fsprogs)
command -v mkfs.btrfs >/dev/null || need_pkgs+=(btrfs-progs)
command -v sfdisk     >/dev/null || need_pkgs+=(fdisk)
command -v chromium   >/dev/null || need_pkgs+=(chromium)
command -v fio        >/dev/null || need_pkgs+=(fio)      # tests/conformance: storlab beside fio
command -v strace     >/dev/null || need_pkgs+=(strace)   # tests/conformance: offsets of psync runs
# tests/test_devices_write_safety.py: a loop device carrying each signature blkid reports
command -v blkid      >/dev/null || need_pkgs+=(util-linux)
command -v pvcreate   >/dev/null || need_pkgs+=(lvm2)
command -v cryptsetup >/dev/null || need_pkgs+=(cryptsetup-bin)
command -v make-bcache >/dev/null || need_pkgs+=(bcache-tools)
command -v xorriso    >/dev/null || need_pkgs+=(xorriso)
command -v mdadm      >/dev/null || need_pkgs+=(mdadm)    # md 1.2 itself is crafted: no md in every kernel
# tests/slurm: a one-node Slurm (slurmctld, slurmd, srun) with munge authentication
{ command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v srun >/dev/null; } || need_pkgs+=(slurm-wlm)
command -v munged     >/dev/null || need_pkgs+=(munge)
# tests/test_cluster.py: the cluster in a box (network namespaces, veth, tc htb, nsenter/unshare)
command -v ip         >/dev/null || need_pkgs+=(iproute2)
command -v nsenter    >/dev/null || need_pkgs+=(util-linux)
command -v iperf3     >/dev/null || need_pkgs+=(iperf3)     # tests/test_net.py: storlab net beside iperf3
# tests/test_nbd.py, test_nfs.py: the network engines' client libraries (loaded at run time) and
# real servers (nbdkit; nfs-ganesha with its VFS backend and an rpcbind for NFSv3)
command -v nbdkit     >/dev/null || need_pkgs+=(nbdkit)
ldconfig -p | grep -q 'libnbd\.so\.0 ' || need_pkgs+=(libnbd0)
ldconfig -p | grep -q 'libnfs\.so\.13 ' || need_pkgs+=(libnfs13)
command -v ganesha.nfsd >/dev/null || need_pkgs+=(nfs-ganesha)
[ -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so ] || need_pkgs+=(nfs-ganesha-vfs)
command -v rpcbind    >/dev/null || need_pkgs+=(rpcbind)
# tests/test_network_fs.py: a network file system through FUSE (SSHFS against an sshd on loopback)
command -v sshfs      >/dev/null || need_pkgs+=(sshfs)
[ -x /usr/sbin/sshd ]            || need_pkgs+=(openssh-server)
if [ "${#need_pkgs[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian packages: ${need_pkgs[*]}"
    # no service a package brings (nfs-ganesha, rpcbind, sshd) is started by its installation: the
    # tests start their own servers, on loopback or in namespaces they make (policy-rc.d, 101: deny)
    policy=/usr/sbin/policy-rc.d; made_policy=""
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; made_policy=1; fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
    [ -z "$made_policy" ] || rm -f "$policy"
fi

echo "== building and installing storlab with test extras"
python3 -m pip install -q --disable-pip-version-check -e '.[test,mpi]'

# Peers built from the tarballs beside the project (../shared/peers), when they are there, into the
# cache, with the mpich wheel's mpicc (installed just above) on PATH; prints the peer's prefix.
mpicc_dir=$(python3 -c 'import sys, os; print(os.path.dirname(sys.executable))')
build_peer() {  # SCRIPT CACHE_FOLDER
    PATH="$mpicc_dir:$PATH" "../shared/peers/$1" "${XDG_CACHE_HOME:-$HOME/.cache}/storlab-peers/$2" | tail -1
}

# tests/test_import.py's round trip imports a real IOR result
if [ -z "${STORLAB_IOR:-}" ] && [ -x ../shared/peers/build-ior.sh ]; then
    echo "== building IOR (peer) from ../shared/peers/build-ior.sh"
    if ior_bin=$(build_peer build-ior.sh ior); then
        export STORLAB_IOR="$ior_bin/ior"
    else
        echo "   IOR could not be built: the IOR round-trip test skips with the reason"
    fi
fi

# tests/test_io500_files.py and tests/test_mdworkbench.py run the real io500 (with its IOR, mdtest,
# md-workbench and pfind) beside storlab io500, and io500's verifier on storlab's result files
if [ -z "${STORLAB_IO500:-}" ] && [ -x ../shared/peers/build-io500.sh ]; then
    echo "== building io500 (peer) from ../shared/peers/build-io500.sh"
    if io500_prefix=$(build_peer build-io500.sh io500); then
        export STORLAB_IO500="$io500_prefix"
    else
        echo "   io500 could not be built: the io500 comparison tests skip with the reason"
    fi
fi

# tests/test_replay.py records real Darshan logs around IOR and a storlab job (darshan-runtime
# also needs autotools and zlib headers; its build script installs them when root)
if [ -z "${STORLAB_DARSHAN:-}" ] && [ -x ../shared/peers/build-darshan.sh ]; then
    echo "== building darshan-runtime (peer) from ../shared/peers/build-darshan.sh"
    if darshan_prefix=$(build_peer build-darshan.sh darshan); then
        export STORLAB_DARSHAN="$darshan_prefix"
    else
        echo "   darshan-runtime could not be built: the recorded-log replay tests skip with the reason"
    fi
fi

# tests/test_fio_http.py: fio 3.42 (its http engine in S3 mode) reads what storlab wrote through the
# S3 gateway and the other way round; Debian's fio 3.33 has no http engine
if [ -x ../shared/peers/build-fio.sh ]; then
    echo "== building fio 3.42 (peer) from ../shared/peers/build-fio.sh"
    build_peer build-fio.sh fio >/dev/null || echo "   fio 3.42 could not be built: the fio-beside-storlab S3 tests skip with the reason"
fi

# tests/test_workload_dlio.py: every workload YAML DLIO ships (the pip wheel's configs/workload/),
# read as data by the translator test; the wheel is downloaded, never installed
if [ -z "${STORLAB_DLIO_CONFIGS:-}" ]; then
    dlio_dir="${XDG_CACHE_HOME:-$HOME/.cache}/storlab-peers/dlio"
    if [ ! -d "$dlio_dir/dlio_benchmark/configs/workload" ]; then
        mkdir -p "$dlio_dir"
        python3 -m pip download -q --disable-pip-version-check --no-deps dlio-benchmark==2.0.0 -d "$dlio_dir" \
            && (cd "$dlio_dir" && python3 -m zipfile -e dlio_benchmark-2.0.0-py3-none-any.whl .) \
            || echo "   dlio-benchmark could not be downloaded: the DLIO config test skips with the reason"
    fi
    [ -d "$dlio_dir/dlio_benchmark/configs/workload" ] && export STORLAB_DLIO_CONFIGS="$dlio_dir/dlio_benchmark/configs/workload"
fi

# tests/test_s3.py: the Versity S3 Gateway (a real S3 server on a folder), built with Go into the
# cache (about 90 s, once)
if [ -z "${STORLAB_VERSITYGW:-}" ]; then
    vgw_bin="${XDG_CACHE_HOME:-$HOME/.cache}/storlab-peers/versitygw/bin"
    if [ ! -x "$vgw_bin/versitygw" ] && command -v go >/dev/null; then
        echo "== building the Versity S3 Gateway (peer) with go install"
        GOBIN="$vgw_bin" go install github.com/versity/versitygw/cmd/versitygw@v1.8.0 \
            || echo "   versitygw could not be built: the s3 engine tests skip with the reason"
    fi
    [ -x "$vgw_bin/versitygw" ] && export STORLAB_VERSITYGW="$vgw_bin/versitygw"
fi

echo "== lint: ruff (rules in pyproject.toml) and clippy, both at zero findings"
python3 -m ruff check python tests benchmarks scripts
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
cargo clippy -q --workspace --all-targets -- -D warnings

echo "== cargo test"
cargo test -q -p storlab-core

echo "== pytest"
python3 -m pytest -q "$@"
