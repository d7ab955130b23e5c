"""The right N from live traffic: estimates from the cost curves (``estimate``), the
advice in words (``words``), curves persisted in the state dir (``store``)."""
