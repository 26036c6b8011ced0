wit_bindgen::generate!({ world: "typed", path: "wit" });

use exports::demo::typed::shapes::{Everything, Guest as Shapes, Point, Shape};

struct Tool;

impl Guest for Tool {
    fn greet(name: String) -> String {
        format!("hello, {name}")
    }
}

impl Shapes for Tool {
    fn move_right(p: Point, dx: i32) -> Point {
        Point { x: p.x.wrapping_add(dx), y: p.y }
    }

    fn echo(value: Everything) -> Everything {
        value
    }

    fn divide(a: i32, b: i32) -> Result<i32, String> {
        if b == 0 {
            Err("division by zero".to_string())
        } else {
            Ok(a.wrapping_div(b))
        }
    }

    fn area(s: Shape) -> f64 {
        match s {
            Shape::Circle(r) => 3.0 * r * r,
            Shape::Rect(p) => f64::from(p.x) * f64::from(p.y),
            Shape::Empty => 0.0,
        }
    }
}

export!(Tool);
