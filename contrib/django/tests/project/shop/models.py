"""One model: the application's row that a run must commit or roll back with."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=50)

    class Meta:
        app_label = "shop"
        db_table = f"{settings.PREFIX}order"
