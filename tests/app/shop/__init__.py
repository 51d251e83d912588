"""A small shop: a Starlette web application and a worker process over one database.

The example application of the cross-distribution tests (``tests/app``): ``shop.web``
takes orders and enqueues their fulfilment in the same transaction as the order's row
(``cairnflow-sqlalchemy``); ``shop.worker`` runs the fulfilment in a process of its
own and serves its Prometheus metrics (``cairnflow-prometheus``); ``cairn dashboard``
(``cairnflow-dashboard``) shows the runs. Configured from the environment:
``SHOP_DATABASE_URL`` (SQLAlchemy's URL of the application's database) and
``CAIRNFLOW_URL`` (the store's URL of the same database).
"""
