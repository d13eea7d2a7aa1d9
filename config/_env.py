"""`$NAME` environment references in configuration values, resolved lazily.

A value written exactly `$NAME` is replaced by the variable's value when the
config loads. When the variable is not set, loading still succeeds: the field
keeps an `UnresolvedEnv` marker and raises `MissingEnvError` (naming the field
and the variable) when code first reads it, so a section nobody uses never
stops the system from starting.
"""

from __future__ import annotations

import os
import re
from functools import cache
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, PrivateAttr, TypeAdapter, model_validator

from config.errors import MissingEnvError

_ENV_REF = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)$")


def env_ref(value: object) -> str | None:
    """The variable name if `value` is a `$NAME` reference, else None."""
    if isinstance(value, str):
        match = _ENV_REF.match(value)
        if match:
            return match.group(1)
    return None


class UnresolvedEnv(str):
    """A `$NAME` value whose variable was unset at load time."""

    variable: str

    def __new__(cls, variable: str) -> UnresolvedEnv:
        obj = super().__new__(cls, "$" + variable)
        obj.variable = variable
        return obj


def resolve_value(value: Any, field: str, source: str | None = None) -> Any:
    """Resolve `$NAME` references anywhere inside `value` (dicts and lists too).

    Raises:
        MissingEnvError: a referenced variable is not set.
    """
    name = env_ref(value)
    if name is not None:
        if name not in os.environ:
            raise MissingEnvError(field, name, source)
        return os.environ[name]
    if isinstance(value, dict):
        return {k: resolve_value(v, f"{field}.{k}", source) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_value(v, f"{field}[{i}]", source) for i, v in enumerate(value)]
    return value


@cache
def _adapter(cls: type[BaseModel], field: str) -> TypeAdapter[Any]:
    return TypeAdapter(cast(Any, cls.model_fields[field].annotation))  # every field of ours has one


class Section(BaseModel):
    """Base of every config section: env references, field paths, typo-proof keys."""

    model_config = ConfigDict(extra="forbid", validate_default=True, populate_by_name=True)

    _path: str = PrivateAttr(default="")
    _source: str | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _resolve_env(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        present: dict[str, Any] = {}
        deferred: dict[str, UnresolvedEnv] = {}
        for key, value in data.items():
            name = env_ref(value)
            if name is None:
                present[key] = value
            elif name in os.environ:
                present[key] = os.environ[name]
            else:
                marker = UnresolvedEnv(name)
                deferred[key] = marker
                field = cls.model_fields.get(key)
                if field is not None and field.is_required():
                    present[key] = marker  # a stand-in so the section can be built; replaced below
        obj = handler(present)
        for key, marker in deferred.items():
            if key in cls.model_fields:
                obj.__dict__[key] = marker
            elif obj.__pydantic_extra__ is not None:
                obj.__pydantic_extra__[key] = marker
        return obj

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if type(value) is UnresolvedEnv:
            return self._late_resolve(name, value)
        return value

    def _late_resolve(self, name: str, marker: UnresolvedEnv) -> Any:
        # The variable may have been exported after loading: use it if so.
        if marker.variable not in os.environ:
            raise MissingEnvError(self.field_path(name), marker.variable, self._source)
        value = _adapter(type(self), name).validate_python(os.environ[marker.variable])
        self.__dict__[name] = value
        return value

    @property
    def source(self) -> str | None:
        """The file this section was read from (None: no file, the defaults)."""
        return self._source

    def field_path(self, name: str) -> str:
        """Dotted path of one of this section's fields, as users write it in config.yaml."""
        return f"{self._path}.{name}" if self._path else name

    def resolved(self, name: str) -> Any:
        """A field (or extra key) with every `$NAME` inside it resolved, containers included."""
        value = getattr(self, name)
        return resolve_value(value, self.field_path(name), self._source)

    def resolved_extra(self) -> dict[str, Any]:
        """The extra (pass-through) keys of a section that allows them, fully resolved."""
        extra = self.__pydantic_extra__ or {}
        return {k: resolve_value(v, self.field_path(k), self._source) for k, v in extra.items()}

    def _bind(self, path: str, source: str | None) -> None:
        """Record where this section lives, for error messages; recurses into children."""
        self._path = path
        self._source = source
        for name in type(self).model_fields:
            _bind_value(self.__dict__.get(name), self.field_path(name), source)


def _bind_value(value: Any, path: str, source: str | None) -> None:
    if isinstance(value, Section):
        value._bind(path, source)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _bind_value(item, f"{path}[{i}]", source)
    elif isinstance(value, dict):
        for key, item in value.items():
            _bind_value(item, f"{path}.{key}", source)
