#!/usr/bin/env python3
"""`switchyard report` in a real browser.

Writes a report of the embedded model with a kernel masked (so the seal report
has violations) and a verification ledger that holds some verdicts (so the
coverage map has more than one state), opens the page in headless Chromium
through its WebDriver, and checks:
  - no console errors while it loads and while it is used;
  - every coverage cell of the JSON embedded in the page is a cell of its
    backend's grid with the same sibling count, state and precision claim, and
    no grid holds a cell the JSON lacks; `report --json` has the same coverage;
  - the violations table holds the JSON's violations, row for row;
  - each bucket's plan table has a row per planned node, sorts and filters;
  - clicking a cell lists its alternatives; the charts were drawn;
  - a page without a model (report --no-model) renders without errors too.
Saves a screenshot (report.png) and the page in ARTIFACTS.

Usage: report_browser_test.py SWITCHYARD ARTIFACTS. Exits 77 (a skip) without
Chromium, its WebDriver or Python's selenium.
"""
import json
import os
import shutil
import subprocess
import sys
import time

SKIP = 77


def skip(why):
    print(f"SKIP: {why}; the browser test needs Debian's chromium, chromium-driver and "
          "python3-selenium (scripts/test.sh installs them)")
    return SKIP


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def run_tool(tool, *args, env=None):
    done = subprocess.run([tool, *args], env=env, capture_output=True, text=True, timeout=600)
    check(done.returncode == 0,
          f"switchyard {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def open_page(driver, path, what):
    """Loads the page at `path`, waits for its script to finish drawing, and checks
    that the console holds no error."""
    driver.get("file://" + os.path.abspath(path))
    for _ in range(100):
        if driver.execute_script("return document.body.getAttribute('data-rendered')"):
            break
        time.sleep(0.1)
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    check(not errors, f"console errors while loading {what}: {errors}")
    check(driver.execute_script("return document.body.getAttribute('data-rendered')") == "true",
          f"the script of {what} did not finish drawing")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tool, artifacts = sys.argv[1], sys.argv[2]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
    except ImportError:
        return skip("python's selenium is missing")
    chromium = shutil.which("chromium")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        return skip("chromium or chromedriver is missing")

    os.makedirs(artifacts, exist_ok=True)
    page = os.path.join(artifacts, "report.html")
    # A name that would end the page's data element and open a comment, were the
    # data not escaped: the page must still render and show it as text.
    # (a directory "ledger <" holds the file "script><!-- & .json").
    ledger = os.path.join(artifacts, "ledger </script><!-- & .json")
    os.makedirs(os.path.dirname(ledger), exist_ok=True)
    env = dict(os.environ, SWITCHYARD_MASK_KERNELS="cpu:matmul:q4_k", SWITCHYARD_THREADS="2")
    # Verdicts for one op: its cells verified, the rest unverified or unaudited.
    if os.path.exists(ledger):
        os.remove(ledger)
    run_tool(tool, "verify", "--op", "add", "--ledger", ledger, env=env)
    # A small calibration profile: the add kernels, a few seconds.
    profile = os.path.join(artifacts, "report-calibration.json")
    run_tool(tool, "calibrate", "--backend", "cpu", "--op", "add", "--budget-s", "3", "--out",
             profile, env=env)
    model_args = ["--backend", "cpu", "--prompt-tokens", "12", "--tokens", "4", "--ledger", ledger,
                  "--calibration", profile]
    run_tool(tool, "report", *model_args, "--out", page, env=env)
    from_json = json.loads(run_tool(tool, "report", *model_args, "--json", env=env))

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1800"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        open_page(driver, page, "the report")
        report = json.loads(driver.execute_script(
            "return document.getElementById('report-data').textContent"))
        check(report["format"] == "switchyard-report" and report["version"] == 1,
              "the embedded document's format")
        shown = driver.execute_script(
            "return document.querySelector('#coverage > p.small').textContent")
        check(ledger in shown, f"the ledger's name is not shown as text: {shown}")
        check(report["coverage"] == from_json["coverage"],
              "report --json and the page disagree on the coverage map")

        # The coverage map: each backend's grid against the JSON.
        states = set()
        for panel in report["coverage"]["backends"]:
            backend = panel["backend"]
            cells = driver.execute_script(
                """return Array.from(document.querySelectorAll(
                       `table.coverage-grid[data-backend="${arguments[0]}"] td.cell`)).map(
                       (td) => [td.dataset.op, td.dataset.dtype, Number(td.dataset.siblings),
                                td.dataset.state, td.dataset.precision,
                                td.querySelector('.n').textContent]);""", backend)
            check(len(cells) == len(panel["cells"]),
                  f"{backend}: {len(cells)} cells drawn, {len(panel['cells'])} in the JSON")
            drawn = {(c[0], c[1]): c for c in cells}
            for cell in panel["cells"]:
                d = drawn.get((cell["op"], cell["dtype"]))
                check(d is not None, f"{backend}: no cell for {cell['op']} / {cell['dtype']}")
                check(d[2] == cell["siblings"] and d[5] == str(cell["siblings"]),
                      f"{backend} {cell['op']}/{cell['dtype']}: siblings {d[2]} vs {cell['siblings']}")
                check(d[3] == cell["state"] and d[4] == cell["best_precision"],
                      f"{backend} {cell['op']}/{cell['dtype']}: state or claim differ")
                check(cell["siblings"] == sum(len(k["alternatives"]) for k in cell["keys"]),
                      "a cell's count is not its alternatives")
                states.add(cell["state"])
        check("verified" in states and "unverified" in states,
              f"the ledger's verdicts do not show: states {states}")

        # The seal report: the masked q4_k matmuls are violations, in the JSON's order.
        violations = report["model"]["seal"]["violations"]
        check(violations, "the masked kernel made no violation")
        rows = driver.execute_script(
            """return Array.from(document.querySelectorAll('#violations tbody tr.violation')).map(
                   (tr) => Array.from(tr.children).map((td) => td.textContent));""")
        expected = [[v["tensor"], v["role"], v["op"], v["dtype"], v["fallback"]] for v in violations]
        check(rows == expected, f"violations table {rows[:3]}... vs JSON {expected[:3]}...")
        check(all(v["dtype"] == "q4_k" for v in violations), "a violation that is not the mask's")

        # The plan: a table per bucket with a row per node.
        for bucket in report["model"]["plan"]["buckets"]:
            n = driver.execute_script(
                """return document.querySelectorAll(
                       `table.plan-table[data-bucket="${arguments[0]}"] tbody tr`).length;""",
                bucket["name"])
            check(n == len(bucket["nodes"]),
                  f"bucket {bucket['name']}: {n} rows, {len(bucket['nodes'])} nodes")

        # Sorting by estimated cost (descending on the second click) and filtering.
        first = report["model"]["plan"]["buckets"][0]
        table = driver.find_element(By.CSS_SELECTOR, f'table.plan-table[data-bucket="{first["name"]}"]')
        cost_header = table.find_elements(By.CSS_SELECTOR, "thead th")[7]
        cost_header.click()
        cost_header.click()
        costs = driver.execute_script(
            """return Array.from(arguments[0].querySelectorAll('tbody tr')).map(
                   (tr) => Number(tr.children[7].dataset.value));""", table)
        check(costs == sorted(costs, reverse=True), "the plan table did not sort by cost")
        name = first["nodes"][0]["name"]
        box = driver.find_element(By.CSS_SELECTOR, f'div.bucket[data-bucket="{first["name"]}"] input.filter')
        box.send_keys(name)
        shown = driver.execute_script(
            """return Array.from(arguments[0].querySelectorAll('tbody tr')).filter(
                   (tr) => !tr.hidden).map((tr) => tr.textContent);""", table)
        check(shown and all(name.lower() in s.lower() for s in shown),
              f"filtering by '{name}' left rows without it")
        driver.execute_script(
            "arguments[0].value = ''; arguments[0].dispatchEvent(new Event('input'))", box)
        check(driver.execute_script(
            "return Array.from(arguments[0].querySelectorAll('tbody tr')).every((tr) => !tr.hidden)",
            table), "clearing the filter did not show every row again")

        # A click on a cell lists its alternatives.
        panel = report["coverage"]["backends"][0]
        cell = max(panel["cells"], key=lambda c: c["siblings"])
        td = driver.find_element(
            By.CSS_SELECTOR, f'table.coverage-grid[data-backend="{panel["backend"]}"] '
                             f'td.cell[data-op="{cell["op"]}"][data-dtype="{cell["dtype"]}"]')
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", td)
        td.click()
        listed = driver.execute_script(
            """return Array.from(document.querySelectorAll('#cell-alternatives tbody tr')).map(
                   (tr) => tr.children[2].textContent);""")
        check(listed == [a["name"] for k in cell["keys"] for a in k["alternatives"]],
              f"the cell's alternatives: {listed}")

        # Calibration: a row per calibrated kernel, and its family's chart.
        families = report["calibration"]["families"]
        series = sum(len(f["series"]) for f in families)
        check(series > 0, "the profile's kernels are not in the report")
        n = driver.execute_script(
            "return document.querySelectorAll('#calibration-points tbody tr').length")
        check(n == series, f"{n} calibration rows for {series} kernels")

        # The charts: time by family, by node, and one per calibrated family, drawn
        # by Chart.js.
        if report["generated"]["charts"]:
            drawn = driver.execute_script(
                """return Array.from(document.querySelectorAll('canvas')).filter(
                       (c) => window.Chart.getChart(c) !== undefined).length;""")
            check(drawn == 2 + len(families), f"{drawn} charts drawn, {2 + len(families)} expected")
        else:
            print("note: this build has no Chart.js; the charts were not checked")

        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        check(not errors, f"console errors while in use: {errors}")

        # A page without a model renders too, and says so where a model's data would be.
        bare = os.path.join(artifacts, "report-no-model.html")
        run_tool(tool, "report", "--no-model", "--out", bare, env=env)
        open_page(driver, bare, "the page without a model")
        for section in ("seal-body", "plan-body", "run-body"):
            text = driver.execute_script(
                f"return document.getElementById('{section}').textContent")
            check("No model in this report" in text, f"{section} without a model: {text}")
        driver.get("file://" + os.path.abspath(page))
        driver.execute_script("window.scrollTo(0, 0)")
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, min(max(height, 1800), 12000))
        shot = os.path.join(artifacts, "report.png")
        check(driver.save_screenshot(shot), "no screenshot")
        print(f"report browser test passed; screenshot {shot}, page {page}")
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
