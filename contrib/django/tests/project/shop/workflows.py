"""The shop's workflows (``CAIRNFLOW['APP']``)."""

from __future__ import annotations

from typing import Any

import cairnflow as cf


def _ship(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
    return {"shipped": data}


workflows = [cf.Workflow("dj-ship", steps=[cf.Step("ship", _ship)])]
