import pytest

from cloudbench.campaign import ConfigError, load_campaign


def test_demo_implies_every_measurement(demo_config):
    c = load_campaign(demo_config)
    ms = list(c.measurements())
    layouts = 3  # plain, chunked-4MiB, multithread
    uploads = [m for m in ms if m.direction == "upload"]
    downloads = [m for m in ms if m.direction == "download"]
    assert len(uploads) == layouts * c.repeats
    assert len(downloads) == 2 * layouts * c.repeats
    assert {m.site for m in uploads} == {"tursa"}
    assert len({m.key + m.site for m in ms}) == len(ms)


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda c: c.update(strategies=["plain", "bittorrent"]), "'bittorrent'"),
        (lambda c: c["dataset"].update(chunk_sizes=["1GiB"]), "dataset.chunk_sizes"),
        (lambda c: c["dataset"].update(files=0), "dataset.files"),
        (lambda c: c.update(repeats=-1), "repeats"),
        (lambda c: c.update(site="mars"), "'mars'"),
        (lambda c: c["dataset"].update(size="12 parsecs"), "dataset.size"),
        (lambda c: c["sites"]["tursa"].update(upload=False), "no upload site"),
        (lambda c: c["sites"]["tesseract"].update(upload=True), "more than one upload site"),
        (lambda c: c["rclone"].update(flags="--fast-list --checksum"), "rclone.flags"),
        (lambda c: c.update(campaign="a/b"), "campaign"),
    ],
)
def test_config_errors_name_key_and_value(demo_config, mutate, needle):
    mutate(demo_config)
    with pytest.raises(ConfigError) as err:
        load_campaign(demo_config)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_chunk_index_width_has_no_10000_ceiling(demo_config):
    demo_config["dataset"].update(size="20001B", chunk_sizes=["1B"])
    c = load_campaign(demo_config)
    assert c.chunk_count(1) == 20001
    assert c.chunk_index_width(1) == 5


def test_remote_paths(demo_config):
    demo_config["remotes"] = {"s3": {"url": "mys3:"}, "disk": {"url": "/data/remote/"}}
    c = load_campaign(demo_config)
    assert c.remote_prefix(c.remote_named("s3"), "x") == "mys3:cloudbench/demo/x"
    assert c.remote_prefix(c.remote_named("disk")) == "/data/remote/cloudbench/demo"
