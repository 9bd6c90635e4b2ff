import pytest

from cloudbench.campaign.model import ConfigError, Measurement, Setting, load_campaign

pytestmark = pytest.mark.unit


def test_demo_implies_every_measurement(demo_file, demo_config):
    """The demo searches (tuning mode): its first round is each layout at its ladder's first
    step, plain at 4 transfers and chunked at 2; its grid without the search, each layout at
    auto."""
    for cfg, settings in (
        (demo_file, {"rclone-1x4", "rclone-1x2"}),
        (demo_config, {"rclone-1xauto"}),
    ):
        c = load_campaign(cfg)
        ms = list(c.measurements())
        layouts = 2  # plain, chunked-4MiB
        uploads = [m for m in ms if m.direction == "upload"]
        downloads = [m for m in ms if m.direction == "download"]
        assert len(uploads) == layouts * c.repeats
        assert len(downloads) == 2 * layouts * c.repeats
        assert {m.site for m in uploads} == {"tursa"}
        assert len({m.key + m.site for m in ms}) == len(ms)
        assert {m.setting.label for m in ms} == settings


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
    demo_config["strategies"] = ["chunked"]
    c = load_campaign(demo_config)
    assert c.chunk_count(1) == 20001
    assert c.chunk_index_width(1) == 5


def test_remote_paths(demo_config):
    del demo_config["remote"], demo_config["remote_location"], demo_config["prices"]
    demo_config["remotes"] = {"s3": {"url": "mys3:"}, "disk": {"url": "/data/remote/"}}
    c = load_campaign(demo_config)
    assert c.remote_prefix(c.remote_named("s3"), "x") == "mys3:cloudbench/demo/x"
    assert c.remote_prefix(c.remote_named("disk")) == "/data/remote/cloudbench/demo"


def test_each_remote_is_measured_by_its_own_tools(demo_config, monkeypatch):
    """s5cmd on the S3 remote, rclone on both (remotes.<name>.tools): one campaign measures
    each tool where it fits; a remote without tools of its own takes the campaign's."""
    from cloudbench.campaign import tune

    monkeypatch.setenv("RCLONE_CONFIG_OBJS_TYPE", "s3")
    del demo_config["remote"], demo_config["remote_location"], demo_config["prices"]
    demo_config["strategies"] = ["plain"]
    demo_config["tools"] = ["rclone"]
    demo_config["remotes"] = {
        "s3": {"url": "objs:", "tools": ["rclone", "s5cmd"]},
        "web": {"url": "dav:"},
    }
    c = load_campaign(demo_config)
    assert c.tools == ("rclone", "s5cmd")
    assert {r.name: r.tools for r in c.remotes} == {"s3": ("rclone", "s5cmd"), "web": ("rclone",)}
    tursa = c.site_named("tursa")
    measured = {(m.remote, m.setting.tool) for m in c.measurements(tursa)}
    assert measured == {("s3", "rclone"), ("s3", "s5cmd"), ("web", "rclone")}
    # a download reads the upload its own remote's tools made
    down = [m for m in c.measurements(c.site_named("tesseract")) if m.remote == "s3"]
    assert {c.copy_setting(m).tool for m in down} == {"rclone", "s5cmd"}
    demo_config["tune"] = {"budget": "1GiB"}
    demo_config["concurrency"] = {"plain": [1, 2]}
    searched = load_campaign(demo_config)
    assert ("web", "upload", "s5cmd") not in tune.searches(searched, tursa)
    assert ("s3", "upload", "s5cmd") in tune.searches(searched, tursa)


def test_an_s3_only_tool_on_a_local_remote_is_refused_naming_the_remote(demo_config):
    del demo_config["remote"], demo_config["remote_location"], demo_config["prices"]
    demo_config["remotes"] = {"disk": {"url": "/data/remote/", "tools": ["rclone", "s5cmd"]}}
    with pytest.raises(ConfigError) as err:
        load_campaign(demo_config)
    said = str(err.value)
    assert "s5cmd speaks S3 only, and remote 'disk' is a local path" in said
    assert "remotes: {disk: {tools: [rclone]}}" in said
    demo_config["remotes"]["disk"]["tools"] = []
    with pytest.raises(ConfigError, match="remotes.disk.tools: "):
        load_campaign(demo_config)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c.update(repeat=5), "repeat: unknown key (did you mean 'repeats'?)"),
        (lambda c: c["dataset"].update(file=5), "dataset.file: unknown key (did you mean 'dataset.files'?)"),  # noqa: E501
        (lambda c: c.update(buckets="x"), "buckets: unknown key (did you mean 'bucket'?)"),
        (lambda c: c["sites"]["tursa"].update(scrach="/x"), "sites.tursa.scrach: unknown key (did you mean 'sites.tursa.scratch'?)"),  # noqa: E501
    ],
)  # fmt: skip
def test_misspelt_keys_are_refused_naming_the_nearest_key(demo_config, mutate, message):
    mutate(demo_config)
    with pytest.raises(ConfigError) as err:
        load_campaign(demo_config)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)
    # keys only site profiles set are not offered (a user read transfers_on among them)
    assert "repeats" in str(err.value) or "files" in str(err.value) or "scratch" in str(err.value)
    assert "transfers_on" not in str(err.value) and "required_env" not in str(err.value)


def test_defaults_come_from_the_schema_not_the_demo():
    """A campaign file without rclone/repeats/strategies gets the schema's defaults only."""
    from cloudbench.campaign.schema import load_schema

    cfg = {
        "campaign": "mine",
        "remote": "s3x:",
        "dataset": {"files": 1, "size": "1GiB"},
        "sites": {"edi": {"upload": True, "scratch": "/tmp/x"}},
    }
    c = load_campaign(cfg)
    props = load_schema()["properties"]
    assert c.repeats == props["repeats"]["default"] == 3
    assert c.rclone_flags == ()
    assert list(c.strategies) == props["strategies"]["default"]
    assert c.chunk_sizes == (64 * 2**20,)
    assert c.bucket == props["bucket"]["default"]
    assert c.site_names == ["edi"] and c.upload_site.name == "edi"
    assert not c.sites[0].download


def test_every_schema_key_has_a_description():
    from cloudbench.campaign.schema import load_schema

    def walk(node, where):
        for key, sub in node.get("properties", {}).items():
            assert sub.get("description"), f"{where}{key} has no description"
            walk(sub, f"{where}{key}.")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            walk(extra, f"{where}<name>.")

    walk(load_schema(), "")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--s3-secret-access-key", "abc"], "rclone.flags[0]: looks like a credential (--s3-secret-access-key)"),  # noqa: E501
        (["--s3-access-key-id=AKIA1234"], "rclone.flags[0]: looks like a credential (--s3-access-key-id)"),  # noqa: E501
        (["--crypt-password", "x"], "rclone.flags[0]: looks like a credential (--crypt-password)"),
        (["--bwlimit 16M"], "rclone.flags: '--bwlimit 16M' is one item; write each argument as its own item: ['--bwlimit', '16M']"),  # noqa: E501
        (["--transfers", "64"], "rclone.flags: --transfers is set by cloudbench"),
        (["--s3-upload-concurrency=8"], "rclone.flags: --s3-upload-concurrency is set by cloudbench"),  # noqa: E501
    ],
)  # fmt: skip
def test_rclone_flags_refused_with_one_line(demo_config, flags, message):
    demo_config["rclone"]["flags"] = flags
    with pytest.raises(ConfigError) as err:
        load_campaign(demo_config)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_a_secret_value_anywhere_in_the_campaign_is_refused(demo_config, monkeypatch):
    monkeypatch.setenv("RCLONE_CONFIG_S3X_SECRET_ACCESS_KEY", "very-secret-value-42")
    demo_config["sites"]["tursa"]["scratch"] = "/scratch/very-secret-value-42"
    with pytest.raises(ConfigError) as err:
        load_campaign(demo_config)
    msg = str(err.value)
    assert msg.startswith("sites.tursa.scratch: looks like a credential")
    assert "RCLONE_CONFIG_S3X_SECRET_ACCESS_KEY" in msg and "very-secret" not in msg


def test_ordinary_flags_pass(demo_config):
    demo_config["rclone"]["flags"] = ["--bwlimit", "16M", "--s3-no-check-bucket", "--checksum"]
    assert load_campaign(demo_config).rclone_flags[-1] == "--checksum"


@pytest.mark.parametrize("name", ["all", "none"])
def test_reserved_site_names_are_refused(demo_config, name):
    demo_config["sites"][name] = demo_config["sites"].pop("tesseract")
    with pytest.raises(ConfigError, match=f"sites: '{name}' is reserved"):
        load_campaign(demo_config)


def test_multithread_below_its_cutoff_is_refused(demo_config):
    demo_config["strategies"] = ["plain", "chunked", "multithread"]
    demo_config["rclone"]["multi_thread_cutoff"] = "1GiB"
    with pytest.raises(ConfigError, match="rclone.multi_thread_cutoff: '1GiB' is above the file"):
        load_campaign(demo_config)


@pytest.mark.parametrize(("size", "cutoff"), [("12MiB", 12 * 2**20), ("4GiB", 256 * 2**20)])
def test_multithread_cutoff_auto_is_rclones_unless_the_files_are_smaller(demo_config, size, cutoff):
    """A campaign of its own with files under 256 MiB and the default strategies runs (the
    default cutoff used to refuse it): auto is the file size then, else rclone's 256 MiB."""
    demo_config["strategies"] = ["plain", "chunked", "multithread"]
    demo_config["rclone"].pop("multi_thread_cutoff", None)
    demo_config["dataset"]["size"] = size  # of each file
    demo_config["dataset"]["chunk_sizes"] = ["4MiB"]
    assert load_campaign(demo_config).multi_thread_cutoff == cutoff


@pytest.mark.parametrize(
    ("size", "part"), [("24MiB", 6 * 2**20), ("12MiB", 5 * 2**20), ("4GiB", 64 * 2**20)]
)
def test_multithread_parts_auto_split_a_small_file_into_several_streams(demo_config, size, part):
    """A new user saw strategy multithread move each 24 MiB file as one stream (64 MiB parts)
    and called it multi-threaded: auto cuts a small file in 4 parts of at least 5 MiB."""
    from cloudbench.measure.rclone import concurrency

    demo_config["strategies"] = ["plain", "chunked", "multithread"]
    demo_config["rclone"].pop("multi_thread_chunk_size", None)
    demo_config["dataset"].update(size=size, chunk_sizes=["4MiB"])
    c = load_campaign(demo_config)
    assert c.multi_thread_chunk_size == part
    conc = concurrency(
        "multithread", 8, objects=2, object_bytes=c.file_bytes, cutoff=c.multi_thread_cutoff,
        part_bytes=c.multi_thread_chunk_size, backend="s3", direction="download",
    )  # fmt: skip
    assert conc.streams_per_object == min(8, -(-c.file_bytes // part))
    assert conc.streams_per_object >= 3 or size == "4GiB"


def test_download_directories_differ_per_site(demo_config, tmp_path):
    from cloudbench.campaign.spec import transfer_spec

    for s in demo_config["sites"].values():
        s["scratch"] = str(tmp_path)  # two sites on one scratch path
    c = load_campaign(demo_config)
    dirs = {transfer_spec(c, m).local_dir for m in c.measurements() if m.direction == "download"}
    assert len(dirs) == len([m for m in c.measurements() if m.direction == "download"])


def test_scratch_estimate_counts_chunks_kept_until_verify(demo_config):
    c = load_campaign(demo_config)
    down_only = c.site_named("tesseract")
    assert c.scratch_needed(down_only) == 3 * c.dataset_bytes  # downloading + chunks + files


def test_config_readme_is_the_schema():
    """config/README.md is generated from the schema, so keys and defaults live in one place."""
    from cloudbench.campaign.schema import config_doc
    from tests.conftest import ROOT

    assert (ROOT / "config" / "README.md").read_text() == config_doc()


def test_columns_page_is_the_record_definition():
    """docs/columns.md and transfers.tsv's columns come from one definition (TransferRow)."""
    from cloudbench.measure.record import TransferRow, columns_doc
    from cloudbench.report.aggregate import TRANSFER_COLUMNS
    from tests.conftest import ROOT

    assert (ROOT / "docs" / "columns.md").read_text() == columns_doc()
    assert TRANSFER_COLUMNS == list(TransferRow.__dataclass_fields__)
    table = [ln for ln in columns_doc().splitlines() if ln.startswith("| ")][2:]
    documented = [line.split(" | ")[0].lstrip("| ") for line in table]
    assert documented == TRANSFER_COLUMNS


def test_a_client_that_moves_one_object_at_a_time_is_not_swept_over_concurrency(
    demo_config, monkeypatch
):
    """s3cmd ignores a concurrency: each value of a sweep would be the same command under
    another label (and another row, and a Scaling 'recommendation' between equals)."""
    monkeypatch.setenv("RCLONE_CONFIG_S3X_TYPE", "s3")
    demo_config["remote"] = "s3x:bench"
    demo_config["tools"] = ["rclone", "s3cmd"]
    demo_config["clients"] = [1, 2]
    demo_config["dataset"]["files"] = 4
    demo_config["concurrency"] = {"plain": [2, 8], "chunked": "auto"}
    c = load_campaign(demo_config)
    tursa = c.site_named("tursa")
    assert [s.label for s in c.settings(tursa, "plain")] == [
        "rclone-1x2", "rclone-1x8", "rclone-2x2", "rclone-2x8", "s3cmd-1x1", "s3cmd-2x1",
    ]  # fmt: skip
    assert [s.label for s in c.settings(tursa, "chunked")] == [
        "rclone-1xauto", "rclone-2xauto", "s3cmd-1x1", "s3cmd-2x1",
    ]  # fmt: skip


def test_s5cmds_sweep_and_search_start_at_the_two_objects_it_moves_at_least(
    demo_config, monkeypatch
):
    """s5cmd --numworkers 1 moves 2 objects at once (campaign.clients.objects_at_once): a
    sweep of 1, 2, 4 measures s5cmd at 2 and 4, named so; a search climbs 2, 4, 8."""
    from cloudbench.campaign import tune

    monkeypatch.setenv("RCLONE_CONFIG_S3X_TYPE", "s3")
    demo_config["remote"] = "s3x:bench"
    demo_config["tools"] = ["rclone", "s5cmd"]
    demo_config["strategies"] = ["plain", "chunked"]
    demo_config["concurrency"] = {"plain": [1, 2, 4], "chunked": [1, 4, 8]}
    c = load_campaign(demo_config)
    tursa = c.site_named("tursa")
    assert [s.label for s in c.settings(tursa, "plain")] == [
        "rclone-1x1", "rclone-1x2", "rclone-1x4", "s5cmd-1x2", "s5cmd-1x4",
    ]  # fmt: skip
    demo_config["tune"] = {"budget": "1GiB"}
    searched = load_campaign(demo_config)
    ladders = tune.space(searched, tursa, "s5cmd").ladders
    assert ladders == {"plain": (2, 4), "chunked-4MiB": (2, 4, 8)}, ladders
    assert [s.label for s in searched.settings(tursa, "plain")] == ["rclone-1x1", "s5cmd-1x2"]


def test_sweeps_multiply_measurements_and_downloads_read_an_uploaded_copy(demo_config):
    demo_config["clients"] = [1, 2]
    demo_config["sites"]["tesseract"]["clients"] = [1, 4]
    demo_config["dataset"]["files"] = 4
    demo_config["concurrency"] = {"chunked": [2, 8], "plain": "auto"}
    c = load_campaign(demo_config)
    tursa, tess = c.site_named("tursa"), c.site_named("tesseract")
    assert [s.label for s in c.settings(tursa, "chunked")] == [
        "rclone-1x2", "rclone-1x8", "rclone-2x2", "rclone-2x8",
    ]  # fmt: skip
    assert [s.label for s in c.settings(tess, "plain")] == ["rclone-1xauto", "rclone-4xauto"]
    downloads = [m for m in c.measurements(tess)]
    assert len(downloads) == 3 * (2 + 4)  # repeats x (plain 2, chunked 4)
    four = next(m for m in downloads if m.setting.label == "rclone-4x8")
    assert c.copy_setting(four).label == "rclone-1x8"  # tursa never ran 4 clients
    two = Measurement("tesseract", "main", "download", four.layout, 1, Setting("rclone", 2, 8))
    assert c.copy_setting(two).label == "rclone-2x8"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(clients=0), "clients: must be a whole number >= 1, got 0"),
        (lambda c: c.update(clients=[1, 4]), "clients: 4 clients need at least as many files"),
        (lambda c: c.update(concurrency={"chunked": [4, 4]}), "concurrency.chunked: the same"),
        (
            lambda c: c.update(strategies=["plain"], concurrency={"multithread": 4}),
            "concurrency.multithread: strategy 'multithread' is not measured",
        ),
        (lambda c: c.update(concurrency={"plain": "fast"}), "concurrency.plain: must be a whole"),
    ],
)
def test_bad_sweeps_are_refused_in_one_line(demo_config, change, message):
    change(demo_config)
    with pytest.raises(ConfigError) as err:
        load_campaign(demo_config)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_reports_name_a_named_remote_by_its_rclone_name_and_never_show_an_address(demo_config):
    demo_config["remote"] = "labstore:"
    assert load_campaign(demo_config).remotes[0].label == "labstore:"
    demo_config["remote"] = "/data/remote"
    assert load_campaign(demo_config).remotes[0].label == "main"
    demo_config["remote"] = ":s3,provider=Ceph,endpoint=https://x.example:"
    assert load_campaign(demo_config).remotes[0].label == "main"


def test_a_remote_without_its_colon_is_refused_when_the_environment_defines_it(
    demo_config, monkeypatch
):
    """A user wrote remote: "benchstore" for the remote their RCLONE_CONFIG_BENCHSTORE_*
    variables define: rclone took it as a local directory and the campaign measured disk."""
    demo_config["remote"] = "benchstore"
    load_campaign(demo_config)  # a local directory is a valid remote (the demo uses one)
    monkeypatch.setenv("RCLONE_CONFIG_BENCHSTORE_TYPE", "s3")
    with pytest.raises(ConfigError, match="'benchstore' is a local directory to rclone, but "
                       "RCLONE_CONFIG_BENCHSTORE_TYPE defines a remote of that name: write "
                       "'benchstore:'"):  # fmt: skip
        load_campaign(demo_config)


def test_the_schema_knows_the_clients_of_the_registry():
    """Adding a client is a module, a registry line and this enum: they cannot drift."""
    from cloudbench.campaign.clients import NAMES
    from cloudbench.campaign.schema import load_schema

    assert load_schema()["properties"]["tools"]["items"]["enum"] == list(NAMES)


@pytest.mark.unit
def test_a_remote_without_a_colon_is_a_directory_and_only_that():
    """What rclone takes for a local path (no backend, no endpoint for the latency probe,
    whose jobs then run on the submitting host): a path, relative or absolute, not a named
    remote or a connection string."""
    from cloudbench.campaign.model import Remote

    assert Remote("demo", "scratch/demo-remote", None).is_directory
    assert Remote("pfs", "/lustre/project/store", None).is_directory
    assert not Remote("main", "s3t:", None).is_directory
    assert not Remote("main", "labstore:bucket/prefix", None).is_directory
    assert not Remote("aws", ":s3,provider=AWS:bucket", None).is_directory
