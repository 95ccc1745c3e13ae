"""The students' address (live/address.py): never a loopback host; the operator's public address first, then the
teacher's own address, then the machine's with the page's port; one line when none is known."""

from __future__ import annotations

import pytest

from live.address import NO_ADDRESS, is_loopback, machine_address, students_base


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST", "app.localhost", "127.0.0.1", "127.8.9.1", "[::1]", "0.0.0.0"]
)
def test_loopback_hosts_are_known(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["10.0.0.5", "192.168.1.20", "atlas.example.org", "[fe80::1]", "128.0.0.1"])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


def test_a_page_opened_on_localhost_gets_the_machines_address_with_its_port() -> None:
    assert students_base("http://localhost:8711/lesson?x=1", "", "10.0.0.5") == ("http://10.0.0.5:8711", "")
    assert students_base("http://127.0.0.1/", "", "10.0.0.5") == ("http://10.0.0.5", "")


def test_a_page_opened_by_a_reachable_address_keeps_it() -> None:
    assert students_base("https://192.168.1.20:8501/math", "", None) == ("https://192.168.1.20:8501", "")


def test_the_public_address_comes_first_and_a_bad_one_is_said() -> None:
    assert students_base("http://localhost:8711/", "https://atlas.example.org/class/", "10.0.0.5") == (
        "https://atlas.example.org/class",
        "",
    )
    base, why = students_base("http://localhost:8711/", "atlas.example.org", "10.0.0.5")
    assert base == "" and "ATLAS_PUBLIC_URL" in why and "\n" not in why


def test_without_any_address_one_line_says_how_to_fix_it() -> None:
    assert students_base("http://localhost:8711/", "", "") == ("", NO_ADDRESS)
    assert "\n" not in NO_ADDRESS and "ATLAS_PUBLIC_URL" in NO_ADDRESS


def test_the_machines_address_is_never_a_loopback_one() -> None:
    found = machine_address()
    assert found is None or not is_loopback(found)
