import pytest

from cloudbench.sizes import SizeError, parse_size, size_label

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.8GiB", 4080218931),  # 3.8 * 2**30 = 4080218931.2, rounded to the byte
        ("100MB", 100_000_000),
        ("104857601", 104857601),
        (104857601, 104857601),
        ("64MiB", 64 * 2**20),
        ("64mib", 64 * 2**20),
        ("1.5 KB", 1500),
        ("2TiB", 2 * 2**40),
        ("0.5MB", 500_000),
        ("7B", 7),
    ],
)
def test_parse_size_is_exact(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "MB", "12 parsecs", "-5MB", "1e9", "3..8GB", -1, 2.5, True])
def test_parse_size_rejects_with_the_value_named(bad):
    with pytest.raises(SizeError) as err:
        parse_size(bad)
    assert str(bad) in str(err.value) or repr(bad) in str(err.value)


@pytest.mark.parametrize("n", [1, 1023, 1024, 4 * 2**20, 64 * 2**20 + 1, 3 * 2**30, 104857601])
def test_size_label_round_trips(n):
    assert parse_size(size_label(n)) == n


@pytest.mark.parametrize(("text", "hint"), [("64M", "64MiB or 64MB"), ("2G", "2GiB or 2GB")])
def test_bare_m_and_g_are_refused_with_a_hint(text, hint):
    """rclone and split read 64M as MiB, most other tools as MB: never guess."""
    with pytest.raises(SizeError) as err:
        parse_size(text)
    assert str(err.value).startswith(f"{text}: write {hint}")
