# Scheduled dbt against Athena: `dbt build` and `dbt source freshness` run from this
# image in CodeBuild (deploy/stacks/lakehouse.py). Only dbt and the project's dbt files
# are inside; versions come from the repository's own pins in constraints.txt.
FROM python:3.11-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DBT_PROFILES_DIR=/opt/lakehouse \
    LAKEHOUSE_DBT_TARGET=athena

WORKDIR /opt/lakehouse
COPY pyproject.toml constraints.txt ./
# The dbt family as pinned in pyproject.toml, resolved against constraints.txt.
RUN python -c "import tomllib; pins = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; print('\n'.join(p for p in pins if p.startswith(('dbt-core==', 'dbt-athena=='))))" > dbt-requirements.txt \
    && pip install -c constraints.txt -r dbt-requirements.txt \
    && rm dbt-requirements.txt

COPY dbt_project.yml profiles.yml ./
# dbt_project/ brings, of the Python helpers, only what publishes the PII key (env
# LAKEHOUSE_PII_KEY, from Secrets Manager) to the table the models read it from,
# before each build (docs/pii.md, "The key on AWS"); .dockerignore leaves the rest out.
COPY dbt_project ./dbt_project
COPY macros ./macros
COPY seeds ./seeds
ENV PYTHONPATH=/opt/lakehouse/dbt_project

# The configuration must parse with the image's own files, so a broken copy fails the
# image build, not the first scheduled run. (`dbt parse` reads no warehouse.)
RUN dbt parse --target athena --no-partial-parse && rm -rf target logs

CMD ["dbt", "build", "--exclude-resource-type", "unit_test"]
