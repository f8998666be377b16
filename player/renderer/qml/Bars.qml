// Black bars around a centred picture or video, drawn only where it is not. Not a black
// rectangle under it: a fade sets the opacity of each child on its own, so a background under
// the content would dim the outgoing layer twice and the cross-fade would pass through dark.
import QtQuick

Item {
    id: bars

    // The content's rectangle in this item's coordinates.
    property rect inner

    anchors.fill: parent

    Rectangle { color: "black"; x: 0; y: 0; width: parent.width; height: bars.inner.y }
    Rectangle {
        color: "black"
        x: 0
        y: bars.inner.y + bars.inner.height
        width: parent.width
        height: parent.height - y
    }
    Rectangle {
        color: "black"
        x: 0
        y: bars.inner.y
        width: bars.inner.x
        height: bars.inner.height
    }
    Rectangle {
        color: "black"
        x: bars.inner.x + bars.inner.width
        y: bars.inner.y
        width: parent.width - x
        height: bars.inner.height
    }
}
