"""The display's TOML configuration: layers, notations and messages that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from player.config import ConfigError, load_config, origin_of


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "display.toml"
    path.write_text(text)
    return path


def test_full_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'name = "Lobby"\ntimezone = "Europe/London"\naccept-cds = false\n'
        'allowed_origins = ["https://Signage.Example.org:443/", "http://10.0.0.2:8000"]\n'
        'api_token = "from-file"\npublic_url = "http://10.0.0.5:8080/"\ndata_dir = "/var/lib/pdn"\n'
        '[location]\nlatitude = "N 54 00.624"\nlongitude = "W2.7870"\n'
        '[listen]\nhost = "0.0.0.0"\nport = 9000\n'
        '[screen]\nindex = 1\nrotation = 90\ncrossfade = 0.5\naudio = "off"\n'
        'video-backend = "gstreamer"\n',
    )
    config = load_config(path, environ={})
    assert config.name == "Lobby"
    assert config.timezone == "Europe/London"
    assert config.accept_cds is False
    assert config.allowed_origins == ("https://signage.example.org", "http://10.0.0.2:8000")
    assert config.api_token == "from-file"
    assert config.public_url == "http://10.0.0.5:8080"
    assert config.data_dir == Path("/var/lib/pdn")
    assert config.location == {"latitude": "N 54 00.624", "longitude": "W2.7870"}
    assert (config.host, config.port) == ("0.0.0.0", 9000)
    assert (config.screen.index, config.screen.rotation, config.screen.crossfade) == (1, 90, 0.5)
    assert (config.screen.audio, config.screen.video_backend) == (False, "gstreamer")
    assert config.origin_allowed("https://signage.example.org/page?x=1")
    assert not config.origin_allowed("https://signage.example.org:8443/page")
    assert not config.origin_allowed("http://signage.example.org/")


def test_layers_environment_then_flags(tmp_path: Path) -> None:
    path = write(tmp_path, 'name = "File"\napi_token = "file"\n[listen]\nport = 9000\n')
    config = load_config(
        path,
        overrides={"port": 9100, "name": "Flag", "host": None},
        environ={"PDN_API_TOKEN": "env"},
    )
    assert (config.name, config.port, config.host, config.api_token) == (
        "Flag",
        9100,
        "127.0.0.1",
        "env",
    )
    assert load_config(None, environ={"PDN_CONFIG": str(path)}).name == "File"


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = load_config(None, environ={})
    assert (config.host, config.port, config.accept_cds, config.api_token) == (
        "127.0.0.1",
        8080,
        True,
        None,
    )
    assert config.allowed_origins == () and config.origin_allowed("http://anything.example/")


def test_data_dir_default_follows_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    assert load_config(None, environ={}).data_dir == Path("data")
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/pdn")
    assert load_config(None, environ={}).data_dir == Path("/var/lib/pdn")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('colour = "red"\n', "colour"),
        ("name = 5\n", "name"),
        ('timezone = "Mars/Olympus"\n', "timezone"),
        ("accept_cds = 1\n", "accept_cds"),
        ('allowed_origins = ["https://a.example/path"]\n', "allowed_origins"),
        ('allowed_origins = ["ftp://a.example"]\n', "allowed_origins"),
        ('public_url = "not a url"\n', "public_url"),
        ('[location]\nlatitude = "E54"\nlongitude = "W2"\n', "location.latitude"),
        ('[location]\nlatitude = "N54"\n', "location.longitude"),
        ('[location]\nlatitude = "N54"\nlongitude = "W2"\naltitude = "3"\n', "location.altitude"),
        ("[listen]\nport = 70000\n", "listen.port"),
        ('[listen]\nport = "80"\n', "listen.port"),
        ("[screen]\nrotation = 45\n", "screen.rotation"),
        ("[screen]\ncrossfade = -1\n", "screen.crossfade"),
        ("[screen]\ncompositor-check = 0.5\n", "screen.compositor-check"),
        ('[screen]\ncompositor-check = "often"\n', "screen.compositor-check"),
        ("[screen]\ntimeout-factor = 0.5\n", "screen.timeout-factor"),
        ('[screen]\ntimeout-factor = "slow"\n', "screen.timeout-factor"),
        ('[screen]\naudio = "loud"\n', "screen.audio"),
        ('[screen]\nvideo-backend = "vlc"\n', "screen.video-backend"),
        ("[screen]\nticker-speed = 0\n", "screen.ticker-speed"),
        ('[screen]\nticker-speed = "fast"\n', "screen.ticker-speed"),
        ("[screen]\nwidth = 3\n", "screen.width"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, text: str, named: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert named in str(caught.value)
    assert str(path) in str(caught.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(tmp_path / "missing.toml", environ={})
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "name = \n"), environ={})


def test_bad_flags(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--port"):
        load_config(None, overrides={"port": 99999}, environ={})
    with pytest.raises(ConfigError, match="--timezone"):
        load_config(None, overrides={"timezone": "Nowhere/Land"}, environ={})


def test_origin_of() -> None:
    assert origin_of("HTTPS://Example.ORG:443/a") == "https://example.org"
    assert origin_of("http://[::1]:8080/x") == "http://[::1]:8080"


# ----------------------------------------------------------- every problem, did you mean


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'colour = "red"\ntimezone = "Mars/Olympus"\n'
        "[listen]\nport = 70000\n"
        "[screen]\nrotaton = 90\ncrossfade = -1\n"
        '[power]\non = "07:00"\noff = "22:00"\ndayz = "mon-fri"\n'
        "[clock]\nrequire_ntpp = true\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    problems = caught.value.problems
    message = str(caught.value)
    for named in (
        "colour",
        "timezone",
        "listen.port",
        "screen.rotaton",
        "screen.crossfade",
        "power.dayz",
        "clock.require_ntpp",
    ):
        assert named in message, named
    assert len(problems) == 7, problems
    assert all(problem.startswith(f"{path}: ") for problem in problems)
    assert message.count("\n") == 6  # one problem a line


@pytest.mark.parametrize(
    ("text", "suggestion"),
    [
        ("[screen]\nrotaton = 90\n", "did you mean 'screen.rotation'?"),
        ('nmae = "Lobby"\n', "did you mean 'name'?"),
        ('timezon = "UTC"\n', "did you mean 'timezone'?"),
        ('[location]\nlatitude = "N54"\nlongitud = "W2"\n', "did you mean 'location.longitude'?"),
        ("[listen]\nprot = 80\n", "did you mean 'listen.port'?"),
        ('[power]\non = "07:00"\noff = "22:00"\ndayz = "mon"\n', "did you mean 'power.days'?"),
        ("[clock]\nrequire_ntpp = true\n", "did you mean 'clock.require_ntp'?"),
        ("rotation = 90\n", "did you mean 'rotation' in [screen]?"),
        ('registr = "http://s.example:8090"\n', "did you mean 'register'?"),
    ],
)
def test_misspelt_keys_suggest_the_key_meant(tmp_path: Path, text: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), environ={})
    assert suggestion in str(caught.value)


def test_no_suggestion_when_nothing_is_close(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, 'colour = "red"\n'), environ={})
    assert "did you mean" not in str(caught.value)


# ------------------------------------------------------------- schedule and register keys

LOCATION = '[location]\nlatitude = "N54.0104"\nlongitude = "W2.7870"\n'


def test_schedule_and_register_as_config_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'schedule = "http://s.example:8090/schedule/lobby/"\n'
        'register = "http://s.example:8090/"\n' + LOCATION,
    )
    config = load_config(path, environ={})
    assert config.schedule_url == "http://s.example:8090/schedule/lobby"
    assert config.register_url == "http://s.example:8090"
    # 'scheduler' is another name for 'register'; flags win over the file.
    path = write(tmp_path, 'scheduler = "http://s.example:8090"\n' + LOCATION)
    assert load_config(path, environ={}).register_url == "http://s.example:8090"
    config = load_config(
        path,
        overrides={"register_url": "http://other.example:8090", "schedule_url": None},
        environ={},
    )
    assert (config.register_url, config.schedule_url) == ("http://other.example:8090", None)


def test_bad_schedule_urls_name_the_key_or_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'schedule'"):
        load_config(write(tmp_path, 'schedule = "ftp://x"\n'), environ={})
    with pytest.raises(ConfigError, match="--schedule"):
        load_config(None, overrides={"schedule_url": "not a url"}, environ={})
    with pytest.raises(ConfigError, match="same setting"):
        load_config(
            write(tmp_path, 'register = "http://a.example"\nscheduler = "http://a.example"\n'),
            environ={},
        )


def test_register_without_a_location_is_a_start_up_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, overrides={"register_url": "http://s.example:8090"}, environ={})
    assert "needs the display's location" in str(caught.value)
    assert "[location]" in str(caught.value)
    path = write(tmp_path, 'register = "http://s.example:8090"\n')
    with pytest.raises(ConfigError, match=r"needs the display's location.*\[location\]"):
        load_config(path, environ={})


def test_check_config_covers_every_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.cli import main

    path = write(
        tmp_path,
        'name = "Lobby"\nschedule = "http://s.example:8090/schedule/lobby/"\n'
        'register = "http://s.example:8090"\n' + LOCATION + "[screen]\nrotation = 90\n"
        '[power]\non = "07:00"\noff = "22:00"\n[clock]\nrequire-ntp = true\n',
    )
    assert main(["display", "--config", str(path), "--check-config"]) == 0
    out = capsys.readouterr().out
    assert "schedule:        http://s.example:8090/schedule/lobby" in out
    assert "register with:   http://s.example:8090" in out
    assert "[screen]:" in out and "rotation 90" in out
    assert "[power]:" in out and "on 07:00, off 22:00" in out
    assert "[clock]:" in out and "only NTP" in out


def test_check_config_lists_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.cli import main

    path = write(tmp_path, "[screen]\nrotaton = 90\n[clock]\nrequire_ntp = 1\n")
    assert main(["display", "--config", str(path), "--check-config"]) == 2
    err = capsys.readouterr().err
    assert "2 configuration problems" in err
    assert "did you mean 'screen.rotation'?" in err and "clock.require-ntp" in err


def test_register_flag_without_location_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    from server.cli import main

    code = main(["display", "--register", "http://s.example:8090", "--check-config"])
    assert code == 2
    assert "needs the display's location" in capsys.readouterr().err


# ------------------------------------------------------------------ [screen] wall


def test_a_video_wall_tile(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[screen]\nwall = {columns = 2, rows = 2, column = 0, row = 1, bezel = 0.02}\n",
    )
    wall = load_config(path, environ={}).screen.wall
    assert wall is not None
    assert (wall.columns, wall.rows, wall.column, wall.row, wall.bezel) == (2, 2, 0, 1, 0.02)
    # 1920x1080 panels: the wall is 3840 + 38.4 by 2160 + 38.4 px; this tile starts a row down.
    assert wall.size(1920, 1080) == pytest.approx((3878.4, 2198.4))
    assert wall.origin(1920, 1080) == pytest.approx((0, 1118.4))
    as_section = write(tmp_path, "[screen.wall]\ncolumns = 3\nrows = 1\ncolumn = 2\nrow = 0\n")
    assert load_config(as_section, environ={}).screen.wall == type(wall)(3, 1, 2, 0, 0.0)
    assert load_config(write(tmp_path, "[screen]\n"), environ={}).screen.wall is None


@pytest.mark.parametrize(
    ("table", "messages"),
    [
        (
            "{columns = 2, rows = 2, column = 2, row = 0}",
            ["'screen.wall.column' must be a whole number from 0 to 1 (the wall has 2 columns"],
        ),
        (
            "{columns = 0, rows = 2, column = 0, row = 0}",
            ["'screen.wall.columns' must be a whole number from 1 to 16"],
        ),
        (
            "{columns = 2, rows = 2, colum = 0, row = 0, bezel = 0.7}",
            [
                "unknown key 'screen.wall.colum'; did you mean 'screen.wall.column'?",
                "'screen.wall.column' is required",
                "'screen.wall.bezel' must be a fraction of a panel's width from 0 to 0.5",
            ],
        ),
        ('"2x2"', ["'screen.wall' must be a table like {columns = 2"]),
        ("{columns = 2, rows = true, column = 0, row = 0}", ["'screen.wall.rows' must be"]),
    ],
)
def test_a_bad_wall_names_its_line_and_every_problem(
    tmp_path: Path, table: str, messages: list[str]
) -> None:
    path = write(tmp_path, f'name = "tile"\n\n[screen]\nrotation = 0\nwall = {table}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    for message in messages:
        assert any(
            problem.startswith(f"{path}:5: ") and message in problem
            for problem in caught.value.problems
        ), (message, caught.value.problems)


def test_ticker_speed(tmp_path: Path) -> None:
    assert load_config(None, environ={}).screen.ticker_speed == 120.0
    fast = load_config(write(tmp_path, "[screen]\nticker-speed = 200\n"), environ={})
    assert fast.screen.ticker_speed == 200.0
    from player.renderer.options import RendererOptions

    assert RendererOptions.from_config(fast, "").ticker_speed == 200.0


def test_timeout_factor_stretches_the_renderers_timeouts(tmp_path: Path) -> None:
    """An emulated Pi (fresh-root.sh --arch arm64) needs minutes where a board needs seconds."""
    from player.renderer.options import RendererOptions

    default = RendererOptions.from_config(load_config(None, environ={}), "")
    assert (default.page_load_timeout, default.hang_timeout, default.recover_within) == (
        15.0,
        10.0,
        20.0,
    )
    slow = load_config(write(tmp_path, "[screen]\ntimeout-factor = 20\n"), environ={})
    assert slow.screen.timeout_factor == 20
    options = RendererOptions.from_config(slow, "")
    assert (options.page_load_timeout, options.hang_timeout, options.recover_within) == (
        300.0,
        200.0,
        400.0,
    )
    # A video's first frame and its stall: 3 s and 5 s on a board. Unstretched, an emulated
    # Pi failed a valid H.264 file with "no frame decoded within 3 s".
    assert (default.video_first_frame, default.video_stalled_after) == (3.0, 5.0)
    assert (options.video_first_frame, options.video_stalled_after) == (60.0, 100.0)


def test_video_zones_auto_is_one_on_a_pi_two_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from player import videodecode

    config = load_config(write(tmp_path, "[screen]\nrotation = 0\n"), environ={})
    assert config.screen.video_zones is None  # auto
    model = tmp_path / "model"
    monkeypatch.setattr(videodecode, "DEVICE_MODEL", model)
    assert config.screen.video_zone_limit() == 2  # no device tree: not a Pi
    model.write_bytes(b"Raspberry Pi 4 Model B Rev 1.5\0")
    assert config.screen.video_zone_limit() == 1
    model.write_bytes(b"Generic ARM board\0")
    assert config.screen.video_zone_limit() == 2
    set_to_three = load_config(write(tmp_path, "[screen]\nvideo-zones = 3\n"), environ={})
    assert set_to_three.screen.video_zone_limit() == 3
    assert (
        load_config(
            write(tmp_path, '[screen]\nvideo-zones = "auto"\n'), environ={}
        ).screen.video_zones
        is None
    )


@pytest.mark.parametrize("value", ["0", "9", "true", '"two"', "1.5"])
def test_a_bad_video_zones_names_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"screen\.video-zones"):
        load_config(write(tmp_path, f"[screen]\nvideo-zones = {value}\n"), environ={})
