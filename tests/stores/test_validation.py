"""Every write is validated as pydantic would; plain fields are not slower for it."""

from __future__ import annotations

import math
from typing import Annotated, Any

import pydantic
import pytest
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from stores import StateValidationError, Store


class Stripped(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)
    name: str = ""


class Lowered(BaseModel):
    model_config = ConfigDict(str_to_lower=True)
    name: str = ""


class Finite(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)
    price: float = 0.0


class Constrained(BaseModel):
    qty: Annotated[int, Field(ge=0)] = 0


class Validated(BaseModel):
    qty: int = 0

    @pydantic.field_validator("qty")
    @classmethod
    def even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("qty must be even")
        return value


class Doubled(BaseModel):
    qty: int = 0

    @pydantic.field_validator("*")
    @classmethod
    def double(cls, value: Any) -> Any:
        return value * 2


class Checked(BaseModel):
    low: int = 0
    high: int = 10

    @pydantic.model_validator(mode="after")
    def ordered(self) -> Checked:
        if self.low > self.high:
            raise ValueError("low must not exceed high")
        return self


class Fixed(BaseModel):
    qty: int = Field(default=0, frozen=True)


class Plain(BaseModel):
    qty: int = 0
    name: str = ""
    ratio: float = 0.0
    flag: bool = False


@pytest.mark.parametrize(
    ("model", "key", "value", "stored"),
    [
        pytest.param(Stripped, "name", "  ana  ", "ana", id="str-strip-whitespace"),
        pytest.param(Lowered, "name", "ANA", "ana", id="str-to-lower"),
        pytest.param(Doubled, "qty", 2, 4, id="wildcard-field-validator"),
        pytest.param(Plain, "qty", True, 1, id="bool-into-int"),
        pytest.param(Plain, "ratio", 3, 3.0, id="int-into-float"),
        pytest.param(Plain, "name", "ana", "ana", id="exact-str"),
    ],
)
def test_writes_store_what_pydantic_makes_of_the_value(
    model: type[BaseModel], key: str, value: Any, stored: Any
) -> None:
    store = Store(model())
    store.set(key, value)
    assert store.get(key) == stored
    assert type(store.get(key)) is type(stored)


@pytest.mark.parametrize(
    ("model", "key", "value", "message"),
    [
        pytest.param(Finite, "price", math.inf, "finite number", id="allow-inf-nan-false"),
        pytest.param(Constrained, "qty", -1, "greater than or equal to 0", id="constraint"),
        pytest.param(Validated, "qty", 3, "qty must be even", id="field-validator"),
        pytest.param(Checked, "low", 11, "low must not exceed high", id="model-validator"),
        pytest.param(Fixed, "qty", 1, "Field is frozen", id="frozen-field"),
        pytest.param(Plain, "qty", "many", "valid integer", id="wrong-type"),
    ],
)
def test_writes_are_refused_where_pydantic_refuses_them(
    model: type[BaseModel], key: str, value: Any, message: str
) -> None:
    store = Store(model())
    before = store.snapshot()
    with pytest.raises(StateValidationError, match=rf"^Invalid value for '{key}': .*{message}"):
        store.set(key, value)
    assert store.snapshot() == before


def test_a_write_records_the_field_as_set() -> None:
    store = Store(Plain())
    store.update(qty=2, name="x")
    assert store.state.model_fields_set == {"qty", "name"}
    assert store.state.model_dump(exclude_unset=True) == {"qty": 2, "name": "x"}


def test_private_attributes_are_kept_and_not_shared_between_versions() -> None:
    class Session(BaseModel):
        count: int = 0
        _cache: dict[str, int] = PrivateAttr(default_factory=dict)

    session = Session()
    session._cache["a"] = 1
    store = Store(session)
    first = store.state
    store.set("count", 1)
    assert store.state._cache == {"a": 1}
    assert store.state.__pydantic_private__ is not first.__pydantic_private__
