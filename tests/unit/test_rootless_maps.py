"""The maps rootless kiln asks for (kiln/rootless.py), from /etc/subuid-like texts; entering the
namespace is tested for real by the suites run rootless (KILN_TEST_ROOTLESS=1, `make test`) and
tests/ops/test_rootless.py."""

from __future__ import annotations

from kiln.rootless import IdRange, UserNamespace, plan_map, subordinate_ranges

SUBUID = """\
alice:100000:65536
kiln:200000:65536
999:300000:10
# a comment
kiln:bad:1
kiln:400000:0
"""


def test_a_users_ranges_by_name_and_by_id_in_file_order():
    assert subordinate_ranges(SUBUID, "kiln", 999) == [(200000, 65536), (300000, 10)]
    assert subordinate_ranges(SUBUID, "alice", 1000) == [(100000, 65536)]
    assert subordinate_ranges(SUBUID, "bob", 1001) == []


def test_root_is_the_users_own_id_and_the_ranges_follow_it():
    assert plan_map(999, [(200000, 65536), (300000, 10)]) == (IdRange(0, 999, 1), IdRange(1, 200000, 65536), IdRange(65537, 300000, 10))
    assert plan_map(999, []) == (IdRange(0, 999, 1),)
    # a range holding the user's own id would map it twice: left out
    assert plan_map(150000, [(100000, 65536), (300000, 5)]) == (IdRange(0, 150000, 1), IdRange(1, 300000, 5))


def test_what_an_id_is_outside_and_what_is_mapped():
    ns = UserNamespace("kiln", plan_map(999, [(200000, 65536)]), plan_map(995, [(200000, 65536)]))
    assert (ns.outside(0), ns.outside(1), ns.outside(10001), ns.outside(65536), ns.outside(65537)) == (999, 200000, 210000, 265535, None)
    assert ns.maps(65534, 65534) and not ns.maps(65537, 1) and not ns.single_id
    assert str(ns.uid_map[1]) == "1 200000 65536"


def test_one_id_mapped_is_said_to_be_weaker():
    full = UserNamespace("kiln", plan_map(999, [(200000, 65536)]), plan_map(995, [(200000, 65536)]))
    single = UserNamespace("kiln", plan_map(999, []), plan_map(995, []))
    assert single.single_id and not full.single_id
    assert len(single.weaker()) == len(full.weaker()) + 1
    said = single.weaker()[-1]
    assert "only one id is mapped" in said and "usermod --add-subuids" in said
