//! SVG pictures of benchmark runs, drawn with plotters: `bench --plot`
//! (each strategy's purchases/s and p99, and the latency CDFs) and
//! `load --plot` (answers per second and latency over the run).

use std::path::Path;

use anyhow::{Context, Result};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

const PALETTE: [RGBColor; 8] = [
    RGBColor(49, 130, 206),
    RGBColor(31, 157, 85),
    RGBColor(214, 69, 69),
    RGBColor(224, 138, 0),
    RGBColor(124, 58, 237),
    RGBColor(11, 197, 234),
    RGBColor(74, 85, 104),
    RGBColor(213, 63, 140),
];

/// One strategy's run, as `bench --plot` draws it.
pub struct StrategyRun {
    pub name: &'static str,
    pub purchases_per_s: f64,
    pub p99_ms: f64,
    /// Latency (ms) at evenly spaced quantiles, for the CDF.
    pub cdf: Vec<(f64, f64)>,
}

/// `points + 1` (latency ms, quantile) pairs of `latencies_us`, for a CDF.
pub fn cdf(latencies_us: &[u64], points: usize) -> Vec<(f64, f64)> {
    let mut sorted = latencies_us.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return Vec::new();
    }
    (0..=points)
        .map(|k| {
            let q = k as f64 / points as f64;
            let i = ((sorted.len() - 1) as f64 * q).round() as usize;
            (sorted[i].max(1) as f64 / 1000.0, q)
        })
        .collect()
}

/// Writes the strategies' picture to `path`: purchases/s, p99 and CDF.
pub fn strategies(path: &Path, runs: &[StrategyRun]) -> Result<()> {
    let root = SVGBackend::new(path, (1500, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let names: Vec<&str> = runs.iter().map(|r| r.name).collect();
    let rates: Vec<f64> = runs.iter().map(|r| r.purchases_per_s).collect();
    let p99: Vec<f64> = runs.iter().map(|r| r.p99_ms).collect();
    bars(&panels[0], "purchases per second", &names, &rates)?;
    bars(&panels[1], "p99 latency, ms", &names, &p99)?;

    let all = runs.iter().flat_map(|r| r.cdf.iter().map(|p| p.0));
    let (lo, hi) = all.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi > 0.0 {
        (lo.max(0.001) * 0.8, hi * 1.25)
    } else {
        (0.01, 1.0)
    };
    let mut chart = ChartBuilder::on(&panels[2])
        .caption("latency CDF (ms, log scale)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(44)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..1f64)?;
    chart
        .configure_mesh()
        .x_desc("latency, ms")
        .y_desc("share of purchases")
        .draw()?;
    let lines: Vec<(&str, &[(f64, f64)])> = runs.iter().map(|r| (r.name, &r.cdf[..])).collect();
    draw_lines(&mut chart, &lines, SeriesLabelPosition::LowerRight)?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn bars(
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    names: &[&str],
    values: &[f64],
) -> Result<()> {
    let max = values.iter().copied().fold(0f64, f64::max).max(1e-9) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d((0..names.len()).into_segmented(), 0f64..max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len())
        .y_label_formatter(&tick(max))
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                names.get(*i).copied().unwrap_or("").to_owned()
            }
            SegmentValue::Last => String::new(),
        })
        .draw()?;
    chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
        let color = PALETTE[i % PALETTE.len()];
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), v),
            ],
            color.filled(),
        );
        bar.set_margin(0, 0, 8, 8);
        bar
    }))?;
    Ok(())
}

/// One second of a `load` run.
pub struct LoadSecond {
    /// Seconds since the start.
    pub t: f64,
    /// Purchases answered with an order.
    pub ok: f64,
    /// Every answer, refusals and errors included.
    pub answers: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Writes a load run's picture to `path`: answers per second and latency
/// over time.
pub fn load(path: &Path, seconds: &[LoadSecond]) -> Result<()> {
    let root = SVGBackend::new(path, (1200, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let end = seconds.last().map_or(1.0, |s| s.t + 1.0);
    let series = |f: fn(&LoadSecond) -> f64| -> Vec<(f64, f64)> {
        seconds.iter().map(|s| (s.t, f(s))).collect()
    };
    over_time(
        &panels[0],
        "answers per second",
        end,
        &[
            ("purchases (ok)", series(|s| s.ok)),
            ("all answers", series(|s| s.answers)),
        ],
    )?;
    over_time(
        &panels[1],
        "latency, ms",
        end,
        &[("p50", series(|s| s.p50_ms)), ("p99", series(|s| s.p99_ms))],
    )?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn over_time(
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    end: f64,
    lines: &[(&str, Vec<(f64, f64)>)],
) -> Result<()> {
    let max = lines
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.1))
        .fold(0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..end, 0f64..max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_label_formatter(&tick(max))
        .draw()?;
    let lines: Vec<(&str, &[(f64, f64)])> = lines.iter().map(|(n, l)| (*n, &l[..])).collect();
    draw_lines(&mut chart, &lines, SeriesLabelPosition::UpperRight)
}

/// Draws each of `lines` (name, points) 2 px wide in the palette's next
/// colour, with a legend at `position`.
fn draw_lines<'a, X: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    lines: &[(&str, &[(f64, f64)])],
    position: SeriesLabelPosition,
) -> Result<()> {
    for (i, (name, points)) in lines.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

/// Axis numbers: whole above 100, one decimal below.
fn tick(max: f64) -> impl Fn(&f64) -> String {
    move |v| match max {
        m if m >= 100.0 => format!("{v:.0}"),
        _ => format!("{v:.1}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cdf_runs_from_the_fastest_to_the_slowest() {
        let points = cdf(&[3_000, 1_000, 2_000, 10_000], 4);
        assert_eq!(points.first(), Some(&(1.0, 0.0)));
        assert_eq!(points.last(), Some(&(10.0, 1.0)));
        assert!(points.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(cdf(&[], 4).is_empty());
    }
}
