"""_rules: which epilogs and arguments are differentiable, and the messages for those that are not."""

from __future__ import annotations

import pytest


def test_every_forward_epilog_has_a_rule_and_gelu_keeps_its_preactivation(torch):
    """Forward epilogs map to (activation, bias); GELU without aux runs as GELU_AUX when a gradient is needed."""
    from nvmath.linalg.advanced import MatmulEpilog as E
    from nvmath.torch._rules import rule_for

    assert rule_for(None) == rule_for(E.DEFAULT)
    assert rule_for(E.GELU_BIAS).run_as == E.GELU_AUX_BIAS and rule_for(E.GELU_BIAS).aux_out is None
    assert rule_for(E.RELU_AUX_BIAS).aux_out == "relu_aux" and rule_for(E.RELU_AUX_BIAS).bias
    assert rule_for(int(E.BIAS)).act is None


@pytest.mark.parametrize("epilog", ["DRELU_BGRAD", "DGELU", "BGRADA", 9999, "x"])
def test_epilogs_without_derivative_are_explained(torch, epilog):
    """Backward epilogs and unknown values raise ValueError listing the differentiable epilogs and the fix."""
    from nvmath.linalg.advanced import MatmulEpilog as E
    from nvmath.torch._rules import rule_for

    value = E[epilog] if isinstance(epilog, str) and epilog in E.__members__ else epilog
    with pytest.raises(ValueError, match="has no derivative.*differentiable epilogs: DEFAULT"):
        rule_for(value)


def test_unsupported_arguments_name_themselves(torch):
    """qualifiers, quantization_scales and other options raise ValueErrors naming the argument."""
    from nvmath.torch._rules import check_unsupported

    check_unsupported(None, None, {"options": None})
    with pytest.raises(ValueError, match="qualifiers"):
        check_unsupported(object(), None)
    with pytest.raises(ValueError, match="quantization_scales"):
        check_unsupported(None, {"a": 1.0})
    with pytest.raises(ValueError, match="stream is not supported"):
        check_unsupported(None, None, {"stream": 7})
