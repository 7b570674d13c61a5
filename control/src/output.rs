//! What the labs write into their `--out` directory, the report step of the lab harness: files
//! (created with their directory, errors naming them), `summary.json`, a time series as CSV,
//! and line plots as SVG (one or more panels stacked, each with its own axes and legend).

use std::{
    fs::{self, File},
    io::{BufWriter, Write},
    ops::Range,
    path::Path,
    time::Duration,
};

use anyhow::Context as _;
use plotters::prelude::*;
use serde::Serialize;

/// How often the labs sample what they measure for their CSV and plots.
pub const SAMPLE: Duration = Duration::from_millis(50);

/// Samples per row of the table a lab prints while it runs (a row every half second).
pub const SAMPLES_PER_ROW: u32 = 10;

/// The header of the table a lab prints while it runs: its CSV's `columns`, each right-aligned
/// in its row's width of `widths`.
pub fn table_header(columns: &[&str], widths: &[usize]) -> String {
    let cells: Vec<String> = columns
        .iter()
        .zip(widths)
        .map(|(column, width)| format!("{column:>width$}"))
        .collect();
    cells.join(" ")
}

/// One switch queue's measures as the tables show them: `"p50/p99/max"` of its sojourn times
/// (µs) and of its occupancy (packets).
pub fn queue_percentiles(sojourn_us: [u64; 3], occupancy: [u64; 3]) -> (String, String) {
    let cell = |[p50, p99, max]: [u64; 3]| format!("{p50}/{p99}/{max}");
    (cell(sojourn_us), cell(occupancy))
}

/// Writes the file `name` in `out` (created if missing) with `body`.
pub fn write_file(
    out: &Path,
    name: &str,
    body: impl FnOnce(&mut BufWriter<File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(name);
    let mut file = BufWriter::new(
        File::create(&path).with_context(|| format!("creating {}", path.display()))?,
    );
    body(&mut file)
        .and_then(|()| Ok(file.flush()?))
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes `summary` as `summary.json` in `out`, pretty-printed.
pub fn write_summary(out: &Path, summary: &impl Serialize) -> anyhow::Result<()> {
    write_file(out, "summary.json", |f| {
        serde_json::to_writer_pretty(&mut *f, summary)?;
        Ok(writeln!(f)?)
    })
}

/// Writes `text` as the file `name` in `out`.
pub fn write_text(out: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    write_file(out, name, |f| Ok(f.write_all(text.as_bytes())?))
}

/// Prints `table`, writes it as the file `table_file` in `out` beside `summary` as
/// `summary.json`, and says so.
pub fn print_and_write_table(
    out: &Path,
    summary: &impl Serialize,
    table: &str,
    table_file: &str,
) -> anyhow::Result<()> {
    print!("{table}");
    write_summary(out, summary)?;
    write_text(out, table_file, table)?;
    println!("wrote summary.json and {table_file} to {}", out.display());
    Ok(())
}

/// A time series: named columns, one row per sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The column names, the CSV's header.
    pub columns: Vec<String>,
    /// The samples, each as long as `columns`.
    pub rows: Vec<Vec<f64>>,
}

impl Series {
    /// An empty series with these columns.
    pub fn new(columns: &[impl AsRef<str>]) -> Series {
        Series {
            columns: columns.iter().map(|c| c.as_ref().to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a sample, one value per column.
    pub fn push(&mut self, row: Vec<f64>) {
        debug_assert_eq!(row.len(), self.columns.len());
        self.rows.push(row);
    }

    /// The (first column, `column`) points, for a plot against the first column (time).
    pub fn points(&self, column: &str) -> Vec<(f64, f64)> {
        let Some(i) = self.columns.iter().position(|c| c == column) else {
            return Vec::new();
        };
        self.rows.iter().map(|r| (r[0], r[i])).collect()
    }

    /// The span of the first column (time) from 0, the x axis of plots against it.
    pub fn time_range(&self) -> Range<f64> {
        0.0..self.rows.last().map_or(0.0, |r| r[0])
    }

    /// The largest value of `column` (0 for none).
    pub fn max(&self, column: &str) -> f64 {
        self.points(column).iter().map(|p| p.1).fold(0.0, f64::max)
    }

    /// Writes the series as CSV: the header, then a row per sample.
    pub fn write_csv(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "{}", self.columns.join(","))?;
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|v| format!("{v}")).collect();
            writeln!(out, "{}", cells.join(","))?;
        }
        Ok(())
    }
}

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Line {
    /// Its name in the legend.
    pub label: String,
    /// Its points (x, y).
    pub points: Vec<(f64, f64)>,
    /// Dashed (a threshold or a reference), else solid.
    pub dashed: bool,
}

impl Line {
    /// A solid line.
    pub fn solid(label: impl Into<String>, points: Vec<(f64, f64)>) -> Line {
        Line {
            label: label.into(),
            points,
            dashed: false,
        }
    }

    /// A dashed horizontal line at `y` across `x`.
    pub fn level(label: impl Into<String>, y: f64, x: &Range<f64>) -> Line {
        Line {
            label: label.into(),
            points: vec![(x.start, y), (x.end, y)],
            dashed: true,
        }
    }
}

/// One panel of a plot: a caption, axes and lines, each line in the palette's next colour.
#[derive(Debug, Clone)]
pub struct Panel {
    /// The caption above the panel.
    pub caption: String,
    /// The x axis' description.
    pub x_desc: String,
    /// The y axis' description.
    pub y_desc: String,
    /// The x range.
    pub x: Range<f64>,
    /// The y range.
    pub y: Range<f64>,
    /// The lines.
    pub lines: Vec<Line>,
}

impl Panel {
    /// A panel against time in seconds over `x`, its y axis from 0 to 10% above `top`.
    pub fn over_time(
        caption: impl Into<String>,
        y_desc: &str,
        x: &Range<f64>,
        top: f64,
        lines: Vec<Line>,
    ) -> Panel {
        Panel {
            caption: caption.into(),
            x_desc: "time (s)".into(),
            y_desc: y_desc.into(),
            x: x.clone(),
            y: 0.0..top * 1.1,
            lines,
        }
    }

    /// A panel of `series`' column `column` (in bytes) against time, with the two `levels`
    /// (name, bytes) it is held between drawn across (ECN's Kmin and Kmax, PFC's XOFF and XON).
    pub fn bytes_between(
        caption: impl Into<String>,
        series: &Series,
        column: &str,
        levels: [(&str, f64); 2],
    ) -> Panel {
        Panel::of_columns(caption, "bytes", series, &[(column, column)], &levels)
    }

    /// A panel of `series` against time: a solid line (label, column) for each of `columns`
    /// and a dashed one (label, value) across for each of `levels`, its y axis up to the
    /// highest of them all (at least 1, so that a panel of zeros still has an axis).
    pub fn of_columns(
        caption: impl Into<String>,
        y_desc: &str,
        series: &Series,
        columns: &[(&str, &str)],
        levels: &[(&str, f64)],
    ) -> Panel {
        let x = series.time_range();
        let top = columns
            .iter()
            .map(|(_, column)| series.max(column))
            .chain(levels.iter().map(|(_, y)| *y))
            .fold(1.0, f64::max);
        let mut lines: Vec<Line> = columns
            .iter()
            .map(|(label, column)| Line::solid(*label, series.points(column)))
            .collect();
        lines.extend(levels.iter().map(|(label, y)| Line::level(*label, *y, &x)));
        Panel::over_time(caption, y_desc, &x, top, lines)
    }
}

/// Writes what a sampling lab measured into `out`: `NAME.csv` (the samples), `NAME.svg` (the
/// panels stacked, 1000 × 360 pixels each) and `summary.json`; and says so.
pub fn write_sampled(
    out: &Path,
    name: &str,
    series: &Series,
    summary: &impl Serialize,
    panels: &[Panel],
) -> anyhow::Result<()> {
    write_file(out, &format!("{name}.csv"), |f| Ok(series.write_csv(f)?))?;
    write_summary(out, summary)?;
    draw_panels(&out.join(format!("{name}.svg")), (1000, 360), panels)?;
    println!(
        "wrote {name}.svg, {name}.csv and summary.json to {}",
        out.display()
    );
    Ok(())
}

/// Draws `panels` stacked, each `(width, height)` pixels, into the SVG file `path`.
pub fn draw_panels(
    path: &Path,
    (width, height): (u32, u32),
    panels: &[Panel],
) -> anyhow::Result<()> {
    let height = height * u32::try_from(panels.len().max(1))?;
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, panel) in root
        .split_evenly((panels.len().max(1), 1))
        .iter()
        .zip(panels)
    {
        draw_panel(area, panel)?;
    }
    root.present()
        .with_context(|| format!("drawing {}", path.display()))?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    // plotters refuses an empty range.
    let widen = |r: &Range<f64>| {
        if r.end > r.start {
            r.clone()
        } else {
            r.start..r.start + 1.0
        }
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(widen(&panel.x), widen(&panel.y))?;
    chart
        .configure_mesh()
        .x_desc(panel.x_desc.as_str())
        .y_desc(panel.y_desc.as_str())
        .draw()?;
    for (i, line) in panel.lines.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let style = colour.stroke_width(if line.dashed { 1 } else { 2 });
        let drawn = if line.dashed {
            chart.draw_series(DashedLineSeries::new(line.points.clone(), 6, 4, style))?
        } else {
            chart.draw_series(LineSeries::new(line.points.clone(), style))?
        };
        drawn
            .label(line.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_as_csv_and_points() {
        let mut series = Series::new(&["time_s", "vq_bytes"]);
        series.push(vec![0.05, 1500.0]);
        series.push(vec![0.1, 0.0]);
        let mut csv = Vec::new();
        series.write_csv(&mut csv).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "time_s,vq_bytes\n0.05,1500\n0.1,0\n"
        );
        assert_eq!(series.points("vq_bytes"), [(0.05, 1500.0), (0.1, 0.0)]);
        assert_eq!(series.max("vq_bytes"), 1500.0);
        assert!(series.points("nothing").is_empty());
    }

    #[test]
    fn files_plots_and_summary_land_in_out() {
        let out = std::env::temp_dir().join(format!("lossless-output-{}", std::process::id()));
        write_summary(&out, &serde_json::json!({"marked": 3})).unwrap();
        let x = 0.0..2.0;
        let panel = Panel {
            caption: "queue".into(),
            x_desc: "time (s)".into(),
            y_desc: "bytes".into(),
            x: x.clone(),
            y: 0.0..10.0,
            lines: vec![
                Line::solid("depth", vec![(0.0, 1.0), (1.0, 8.0), (2.0, 2.0)]),
                Line::level("Kmin", 5.0, &x),
            ],
        };
        draw_panels(&out.join("plot.svg"), (800, 300), &[panel.clone(), panel]).unwrap();
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["marked"], 3);
        let svg = fs::read_to_string(out.join("plot.svg")).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches("queue\n</text>").count(), 2, "two panels");
        assert!(svg.contains("Kmin\n</text>"));
        fs::remove_dir_all(&out).unwrap();
    }
}
