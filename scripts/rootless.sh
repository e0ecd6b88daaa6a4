#!/bin/sh
# Rootless kiln on this machine, run as root: `scripts/rootless.sh prepare` makes what an
# administrator hands an ordinary user once (the user, its subordinate id range, Debian's uidmap,
# a cgroup subtree it owns, the folders kiln writes), idempotently and quietly; `scripts/rootless.sh
# serve` does that and then starts `kiln serve` as the user inside the subtree, so that no
# process of kiln runs as root (`make run-rootless`). `exec CMD...` runs any command so (the
# test suites start their servers through it).
#
# RUN_ROOTLESS_USER (default kiln) names the user; RUN_INSTANCE (default kiln) the instance, whose
# /run/<instance> and /var/lib/<instance> the user gets; RUN_ROOTLESS_SUBIDS=0 hands the user no
# subordinate ids (kiln then maps only the user's own: weaker, and it says how). Every RUN_*
# variable reaches kiln.
set -eu
PATH="$PATH:/usr/sbin:/sbin"  # useradd, usermod

user=${RUN_ROOTLESS_USER:-kiln}
instance=${RUN_INSTANCE:-kiln}
repo=$(cd "$(dirname "$0")/.." && pwd)
subtree=kiln-rootless  # below root's own cgroup in each hierarchy; each kiln makes its instance's below

need_uidmap() {
    command -v newuidmap >/dev/null 2>&1 && command -v newgidmap >/dev/null 2>&1 && return
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q uidmap >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q uidmap >/dev/null; }
}

need_user() {
    id -u "$user" >/dev/null 2>&1 ||
        useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
}

# 65536 ids above every range handed out so far (and above 200000: clear of system and login
# ids), the same for uids and gids
need_ranges() {
    touch /etc/subuid /etc/subgid
    start=$(awk -F: 'BEGIN { top = 200000 } NF == 3 && $2 + $3 > top { top = $2 + $3 } END { print top }' /etc/subuid /etc/subgid)
    grep -q "^$user:" /etc/subuid || usermod --add-subuids "$start-$((start + 65535))" "$user"
    grep -q "^$user:" /etc/subgid || usermod --add-subgids "$start-$((start + 65535))" "$user"
}

# /run/<instance>, and the file store's folder (default /var/lib/<instance>/files), with what a
# root kiln left in them (its front's: `make run` before `make run-rootless`)
need_dirs() {
    for dir in "/run/$instance" "${RUN_FILE_STORE:-/var/lib/$instance}"; do
        mkdir -p "$dir"
        [ -z "$(find "$dir" ! -user "$user" -print -quit)" ] || chown -R "$user:" "$dir"
    done
}

# One subtree per cgroup hierarchy kiln uses, owned by the user, below this shell's own cgroup
# (which folders those are is kiln's: kiln/sandbox/cgroup_detect.py). v2: the controllers kiln
# needs are enabled down to it (systemd's Delegate=yes does the same for a unit).
cgroup_dirs() {
    "$repo/.venv/bin/python" -m kiln.sandbox.cgroup_detect | sed "s|\$|/$subtree|"
}

need_cgroups() {
    [ -f /sys/fs/cgroup/cgroup.controllers ] && [ -d /run/systemd/system ] && return  # as_user's scope
    for dir in $(cgroup_dirs); do
        if [ ! -d "$dir" ]; then
            if [ -f "$(dirname "$dir")/cgroup.subtree_control" ]; then
                for c in memory pids cpu; do echo "+$c" >"$(dirname "$dir")/cgroup.subtree_control" 2>/dev/null || true; done
            fi
            mkdir "$dir"
        fi
        chown -R "$user:" "$dir"
    done
}

enter_cgroups() {
    for dir in $(cgroup_dirs); do
        echo $$ >"$dir/cgroup.procs"
    done
}

# What a workspace lets every run write (its caches: world-writable) is copied up into a run's
# overlay when written, which keeps its owner: in a user namespace only an id mapped there can
# be kept, so those paths become the user's (they are anyone's to write already).
need_workspace_owner() {
    find "${RUN_WORKSPACE:-$repo/langs}" -perm -o+w ! -type l ! -user "$user" -exec chown -h "$user:" {} + 2>/dev/null || true
}

# The user must reach the checkout (its .venv, kiln-init, the workspaces): a folder on the way
# that it may not search (a clone below /root, say) gets search permission for others, not
# listing.
need_reachable() {
    dir=$repo
    while [ "$dir" != / ]; do
        setpriv --reuid="$user" --regid="$user" --clear-groups test -x "$dir" 2>/dev/null || chmod o+x "$dir"
        dir=$(dirname "$dir")
    done
}

prepare() {
    need_uidmap
    need_user
    [ "${RUN_ROOTLESS_SUBIDS:-1}" = 0 ] || need_ranges
    need_dirs
    need_cgroups
    need_workspace_owner
    need_reachable
}

# cgroup v2 under systemd: a transient scope with Delegate=yes is the user's subtree (a folder
# made here could not take controllers while this shell's cgroup holds processes). systemd hands
# a scope's cgroup to no user (systemd-run --uid left it root's: the rootless kiln then ran with
# no cgroup limits at all), so root does what delegation means (cgroup v2's "Delegation
# Containment"): the folder and its cgroup.procs, cgroup.threads and cgroup.subtree_control
# become the user's, in the scope, before it drops to the user.
as_user() {
    cd "$repo"
    if [ -f /sys/fs/cgroup/cgroup.controllers ] && [ -d /run/systemd/system ]; then
        exec systemd-run --quiet --scope -p Delegate=yes -- "$0" delegated "$@"
    fi
    enter_cgroups
    drop_to_user "$@"
}

drop_to_user() {
    # the bounding set stays: newuidmap and newgidmap are setuid helpers
    exec setpriv --reuid="$user" --regid="$user" --init-groups --inh-caps=-all \
        env HOME=/nonexistent "$@"
}

hand_own_cgroup_to_user() {
    own=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
    chown "$user:" "$own" "$own/cgroup.procs" "$own/cgroup.threads" "$own/cgroup.subtree_control"
}

case "${1:-serve}" in
prepare) prepare ;;
serve) prepare && as_user "$repo/.venv/bin/kiln" serve ;;
exec) shift && prepare && as_user "$@" ;;
delegated) shift && cd "$repo" && hand_own_cgroup_to_user && drop_to_user "$@" ;;  # as_user's, in its scope
*) echo "usage: $0 [prepare|serve|exec CMD...]" >&2 && exit 2 ;;
esac
