"""fleets.py: the built-in fleets as the fleet benchmark's issue gives them, and fleet files (a
user's own links and partition) read or refused with a reason."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleets  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fleets.py")


def cli(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def write(tmp_path, text, name="mine.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_fleet_a_and_b_are_the_issues_links_and_partitions():
    a = cli("links", "A").stdout.split()
    ups = [int(r[:-4]) for r in a[0::2]]
    downs = [int(r[:-4]) for r in a[1::2]]
    assert ups == [1, 2, 5, 10, 20, 50, 50, 100]
    assert downs == [4 * u for u in ups]
    b = cli("links", "B").stdout.split()
    assert b == ["2mbit", "8mbit"] * 7 + ["100mbit", "100mbit"]
    assert cli("partition", "A", "5").stdout.strip() == "{dirichlet_alpha: 0, volume_ratio: 10, seed: 5}"
    assert cli("prep", "B").stdout.strip() == "--alpha 0.3 --volume-ratio 1"
    assert cli("workers", "A").stdout.strip() == "8"
    assert cli("name", "B").stdout.strip() == "B"


def test_a_fleet_file_gives_one_link_per_worker_with_counts_expanded(tmp_path):
    path = write(tmp_path, """
links:
  - {up: 0.5, down: 2}
  - {up: 3, down: 12, count: 3}
partition: {dirichlet_alpha: 0.25, volume_ratio: 4}
""", "edge-lab.yaml")
    assert cli("workers", path).stdout.strip() == "4"
    assert cli("name", path).stdout.strip() == "edge-lab"  # the file's stem
    assert cli("links", path).stdout.split() == ["500kbit", "2mbit"] + ["3mbit", "12mbit"] * 3
    assert cli("partition", path, "2").stdout.strip() == (
        "{dirichlet_alpha: 0.25, volume_ratio: 4, seed: 2}")
    assert cli("prep", path).stdout.strip() == "--alpha 0.25 --volume-ratio 4"


def test_a_file_without_a_partition_has_equal_iid_shards_and_may_name_itself(tmp_path):
    path = write(tmp_path, "name: site-7\nlinks: [{up: 10, down: 10}]\n")
    f = fleets.fleet(path)
    assert f["name"] == "site-7"
    assert f["links"] == [(10.0, 10.0)]
    assert f["partition"] == {"dirichlet_alpha": 0, "volume_ratio": 1}


@pytest.mark.parametrize("text,says", [
    ("links: []\n", "non-empty list"),
    ("links: {up: 1, down: 1}\n", "non-empty list"),
    ("links: [{up: 1}]\n", "expected {up"),
    ("links: [{up: 1, down: 1, latency: 3}]\n", "unknown key(s) latency"),
    ("links: [{up: -1, down: 1}]\n", "outside"),
    ("links: [{up: .nan, down: 1}]\n", "outside"),
    ("links: [{up: '2', down: 1}]\n", "expected a number"),
    ("links: [{up: 1, down: 20000}]\n", "outside"),
    ("links: [{up: 1, down: 1, count: 0}]\n", "whole number"),
    ("links: [{up: 1, down: 1, count: true}]\n", "whole number"),
    ("links: [{up: 1, down: 1, count: 251}]\n", "more than 250 workers"),
    ("links: [{up: 1, down: 1}]\npartition: {volume_ratio: 0.5}\n", "outside"),
    ("links: [{up: 1, down: 1}]\npartition: {skew: 1}\n", "unknown key(s) skew"),
    ("links: [{up: 1, down: 1}]\npartition: [1]\n", "must be a mapping"),
    ("links: [{up: 1, down: 1}]\nname: 'a b'\n", "must be 1-40 letters"),
    ("links: [{up: 1, down: 1}]\nname: \"abc\\n\"\n", "must be 1-40 letters"),
    ("links: [{up: 1, down: 1}]\nname: null\n", "must be 1-40 letters"),
    ("links: [{up: 1, down: 1}]\nname: 7\n", "must be 1-40 letters"),
    ("links: [{up: 1, down: 1}]\nname: A\n", "is a built-in fleet's"),
    ("a: &a [1, 1]\nb: &b [*a, *a]\nlinks: [{up: 1, down: 1}]\n", "aliases (*name) are not allowed"),
    ("links: [{up: 1, down: 1}]\nworkers: 3\n", "unknown key(s) workers"),
    ("- 1\n- 2\n", "expected a mapping"),
    ("links: [{up: 1, down: 1\n", "cannot be read as YAML"),
])
def test_a_bad_fleet_file_is_refused_with_the_reason(tmp_path, text, says):
    path = write(tmp_path, text)
    with pytest.raises(fleets.FleetError) as e:
        fleets.fleet(path)
    assert says in str(e.value)
    assert path in str(e.value)
    r = cli("check", "A", path)
    assert r.returncode == 2
    assert says in r.stderr


def test_a_missing_file_or_a_directory_is_neither_a_fleet_nor_a_crash(tmp_path):
    for spec in (str(tmp_path / "absent.yaml"), str(tmp_path), "C"):
        r = cli("links", spec)
        assert r.returncode == 2
        assert "not a fleet name (A B) nor a regular file" in r.stderr
        assert "Traceback" not in r.stderr


def test_check_passes_every_readable_fleet(tmp_path):
    path = write(tmp_path, "links: [{up: 1, down: 4, count: 250}]\n")
    r = cli("check", "A", "B", path)
    assert r.returncode == 0, r.stderr


def test_a_file_larger_than_64_kib_is_refused_unread(tmp_path):
    path = write(tmp_path, "links: [{up: 1, down: 1}]\n" + "#" * (64 << 10) + "\n")
    r = cli("check", path)
    assert r.returncode == 2
    assert "larger than 65536 bytes" in r.stderr


def test_a_long_bad_value_is_shortened_in_the_message(tmp_path):
    path = write(tmp_path, "links: [{up: '" + "x" * 5000 + "', down: 1}]\n")
    r = cli("check", path)
    assert r.returncode == 2
    assert len(r.stderr) < 400


def test_check_refuses_two_fleets_of_one_name(tmp_path):
    one = write(tmp_path, "name: twin\nlinks: [{up: 1, down: 1}]\n", "one.yaml")
    two = write(tmp_path, "name: twin\nlinks: [{up: 2, down: 2}]\n", "two.yaml")
    r = cli("check", one, two)
    assert r.returncode == 2
    assert "two fleets named 'twin'" in r.stderr
    assert cli("check", "A", "A").returncode == 2


def test_check_for_the_cnn_refuses_what_its_trainers_cannot_take(tmp_path):
    both = write(tmp_path, "links: [{up: 1, down: 1}]\npartition: {dirichlet_alpha: 0.3, "
                 "volume_ratio: 2}\n", "both.yaml")
    big = write(tmp_path, "links: [{up: 1, down: 1, count: 33}]\n", "big.yaml")
    fine = write(tmp_path, "links: [{up: 1, down: 1, count: 32}]\npartition: "
                 "{volume_ratio: 4}\n", "fine.yaml")
    assert cli("check", both, big).returncode == 0  # the softmax takes both
    r = cli("check", "--cnn", both)
    assert r.returncode == 2 and "not both" in r.stderr
    r = cli("check", "--cnn", big)
    assert r.returncode == 2 and "at most 32 workers" in r.stderr
    assert cli("check", "--cnn", "A", "B", fine).returncode == 0


def test_resolve_copies_each_checked_file_once_and_names_the_copies(tmp_path):
    src = write(tmp_path, "links: [{up: 3, down: 12}]\n", "lab.yaml")
    out = tmp_path / "resolved"
    out.mkdir()
    r = cli("resolve", str(out), "B", src)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["B", str(out / "lab.yaml")]
    with open(src, "w") as f:  # changed after the copy: the runs read the copy
        f.write("links: [{up: 0, down: 0}]\n")
    assert cli("links", str(out / "lab.yaml")).stdout.split() == ["3mbit", "12mbit"]
    assert cli("name", str(out / "lab.yaml")).stdout.strip() == "lab"
    assert cli("resolve", str(out), src).returncode == 2
