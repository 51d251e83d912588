"""cairnflow-mysql: cairnflow's durable store on MySQL 8.0+ and MariaDB 10.6+.

::

    import cairnflow as cf

    store = cf.open_store("mysql://app:secret@db.internal:3306/app")  # or mariadb://...
    store.migrate()
"""

from ._dialect import MySQLDialect, migration_lock_name
from ._errors import broken_trigger, classify_mysql_error
from ._server import (
    MIN_MARIADB,
    MIN_MYSQL,
    ServerVersion,
    UnsupportedServer,
    check_server_version,
    parse_server_version,
)
from ._store import MYSQL_CAPABILITIES, SQL_MODE, MySQLStore
from ._url import MySQLURL, parse_url
from ._version import __version__

__all__ = [
    "MIN_MARIADB",
    "MIN_MYSQL",
    "MYSQL_CAPABILITIES",
    "SQL_MODE",
    "MySQLDialect",
    "MySQLStore",
    "MySQLURL",
    "ServerVersion",
    "UnsupportedServer",
    "__version__",
    "broken_trigger",
    "check_server_version",
    "classify_mysql_error",
    "migration_lock_name",
    "parse_server_version",
    "parse_url",
]
