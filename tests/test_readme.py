"""The README's minimal example runs as written, and its two devices agree."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_and_matches_the_reference():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md lost its python example"
    scope = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    model, reference, x, y = (scope[k] for k in ("model", "reference", "x", "y"))
    engine_loss, engine_grads = model.loss_and_grad(x, y)
    reference_loss, reference_grads = reference.loss_and_grad(x, y)
    assert abs(engine_loss - reference_loss) <= 1e-5 * abs(reference_loss)
    assert scope["spikes"].shape == (25, len(y), 10)
