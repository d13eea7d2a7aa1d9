"""Teams: who a person is across the web and chats, what their role lets them use, and the audit trail.

A shared library (like `bus` and `config`): the gateway, the router and the runner use it, it imports
no component. `policy` turns a role from config into what may be used; `roles` keeps people's
assigned roles and chat users linked to accounts (KV `<prefix>_access`); `audit` writes and reads the
audit trail (stream `<PREFIX>_AUDIT`).
"""

from access.audit import AuditLog, AuditRecord
from access.policy import Permissions, permissions_for
from access.roles import RoleBook

__all__ = ["AuditLog", "AuditRecord", "Permissions", "RoleBook", "permissions_for"]
