{# Generated from streaming/contracts/*.yml by `lakehouse scaffold` (or
   `python -m streaming.operations.contract_pii`);
   do not edit (tests/dbt/test_dbt_pii.py checks it matches the contracts). #}
{% macro contract_columns() %}
  {{ return({
  "app_invoices": {
    "columns": [
      "pk",
      "sk",
      "gsi1pk",
      "gsi1sk",
      "amount",
      "currency",
      "status",
      "issued_at",
      "lines"
    ],
    "pii": []
  },
  "app_tenants": {
    "columns": [
      "pk",
      "sk",
      "gsi1pk",
      "gsi1sk",
      "name",
      "plan",
      "created_at"
    ],
    "pii": []
  },
  "app_unrouted": {
    "columns": [
      "pk",
      "sk",
      "gsi1pk",
      "gsi1sk"
    ],
    "pii": []
  },
  "app_users": {
    "columns": [
      "pk",
      "sk",
      "gsi1pk",
      "gsi1sk",
      "email",
      "role",
      "last_login_at"
    ],
    "pii": [
      "email"
    ]
  },
  "customers": {
    "columns": [
      "id",
      "cust_name",
      "email",
      "registration_date"
    ],
    "pii": [
      "cust_name",
      "email"
    ]
  },
  "orders": {
    "columns": [
      "customer_id",
      "order_id",
      "created_at",
      "status",
      "amount",
      "currency",
      "is_gift",
      "gift_message",
      "tags",
      "package_weights_kg",
      "receipt_digest",
      "attachment_checksums",
      "line_items",
      "shipping_address"
    ],
    "pii": [
      "gift_message",
      "shipping_address"
    ]
  }
}) }}
{% endmacro %}
