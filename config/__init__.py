"""Antler's configuration: config.yaml (`AppConfig`) and extensions_config.json.

from config import load_config
cfg = load_config()          # explicit path > $ANTLER_CONFIG_PATH > ./config.yaml > defaults
cfg.get_model().api_key      # `$OPENAI_API_KEY` resolves here, or raises MissingEnvError
"""

from config._env import Section, UnresolvedEnv, resolve_value
from config.app import (
    AppConfig,
    BusConfig,
    ChannelConfig,
    ChannelsConfig,
    ContextSize,
    DingTalkConfig,
    EmbeddedNatsConfig,
    FeishuConfig,
    GatewayConfig,
    GatewayToken,
    MemoryConfig,
    ModelConfig,
    RunnerConfig,
    SandboxConfig,
    SkillsConfig,
    SlackConfig,
    SubagentsConfig,
    SummarizationConfig,
    TelegramConfig,
    TitleConfig,
    ToolConfig,
    ToolGroupConfig,
)
from config.errors import (
    ConfigError,
    ConfigFileNotFoundError,
    ConfigParseError,
    ConfigValidationError,
    MissingEnvError,
)
from config.extensions import (
    ExtensionsConfig,
    McpServerConfig,
    SkillState,
    read_raw_extensions,
    write_extensions_config,
)
from config.loader import (
    CONFIG_ENV,
    EXTENSIONS_ENV,
    extensions_path,
    find_file,
    load_config,
    load_extensions,
)

__all__ = [
    "CONFIG_ENV",
    "EXTENSIONS_ENV",
    "AppConfig",
    "BusConfig",
    "ChannelConfig",
    "ChannelsConfig",
    "ConfigError",
    "ConfigFileNotFoundError",
    "ConfigParseError",
    "ConfigValidationError",
    "ContextSize",
    "DingTalkConfig",
    "EmbeddedNatsConfig",
    "ExtensionsConfig",
    "FeishuConfig",
    "GatewayConfig",
    "GatewayToken",
    "McpServerConfig",
    "MemoryConfig",
    "MissingEnvError",
    "ModelConfig",
    "RunnerConfig",
    "SandboxConfig",
    "Section",
    "SkillState",
    "SkillsConfig",
    "SlackConfig",
    "SubagentsConfig",
    "SummarizationConfig",
    "TelegramConfig",
    "TitleConfig",
    "ToolConfig",
    "ToolGroupConfig",
    "UnresolvedEnv",
    "extensions_path",
    "find_file",
    "load_config",
    "load_extensions",
    "read_raw_extensions",
    "resolve_value",
    "write_extensions_config",
]
