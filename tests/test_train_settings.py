"""`python -m training.train --set KEY=VALUE`: one run's settings changed from its task's, checked before any
data is read."""

import pytest

from training.tasks import TASKS
from training.train import main, with_settings


def test_settings_change_the_task_and_its_model_only_where_named():
    other = {"learned": "sinusoidal", "sinusoidal": "learned"}[TASKS["lm"].model["positional"]]
    spec = with_settings(TASKS["lm"], [f'model.positional="{other}"', "repeat_random_share=0.3", "model.dropout=0"])
    assert spec.model["positional"] == other
    assert spec.repeat_random_share == 0.3
    assert spec.model["dropout"] == 0.0 and isinstance(spec.model["dropout"], float)  # an int where a float is
    assert {k: v for k, v in spec.model.items() if k not in ("positional", "dropout")} == {
        k: v for k, v in TASKS["lm"].model.items() if k not in ("positional", "dropout")
    }
    assert TASKS["lm"].model["positional"] != other  # the task itself is untouched
    assert with_settings(TASKS["lm"], []) == TASKS["lm"]


@pytest.mark.parametrize(
    "setting, words",
    [
        ("nope=1", "not a setting"),
        ("model.nope=1", "not a setting"),
        ('name="x"', "not a setting"),  # what names the run is not a setting
        ("model.positional=sinusoidal", "not a JSON value"),
        ("model.positional=3", "is of type int"),
        ("max_steps=2.5", "is of type float"),
        ("warmup", "KEY=VALUE"),
    ],
)
def test_a_bad_setting_is_named(setting, words):
    with pytest.raises(ValueError, match=words):
        with_settings(TASKS["lm"], [setting])


def test_the_command_refuses_a_bad_setting_before_reading_data(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--task", "lm", "--set", "model.positional=3", "--data", str(tmp_path), "--out", str(tmp_path / "o")])
    assert stop.value.code == 2
    assert "model.positional" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
